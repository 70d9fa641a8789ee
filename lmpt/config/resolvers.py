"""OmegaConf resolvers lmpt's configs use."""

from __future__ import annotations

import os

from omegaconf import OmegaConf

_claimed: dict[str, str] = {}


def unique_dir(base: str) -> str:
    """Claim `base`, or `base_1`, `base_2`, ... with an atomic mkdir, so two runs started in the same
    second never share a directory. Cached per process: Hydra may resolve the key more than once."""
    if base in _claimed:
        return _claimed[base]
    parent = os.path.dirname(base)
    if parent:
        os.makedirs(parent, exist_ok=True)
    candidate, n = base, 0
    while True:
        try:
            os.mkdir(candidate)
            break
        except FileExistsError:
            n += 1
            candidate = f"{base}_{n}"
    _claimed[base] = candidate
    return candidate


def register_resolvers() -> None:
    if not OmegaConf.has_resolver("lmpt.unique_dir"):
        OmegaConf.register_new_resolver("lmpt.unique_dir", unique_dir)
