"""OmegaConf resolvers lmpt's configs use."""

from __future__ import annotations

import os
import tempfile

from omegaconf import OmegaConf

_claimed: dict[str, str] = {}


def unique_dir(base: str) -> str:
    """Claim `base`, or `base_1`, `base_2`, ... with an atomic mkdir, so two runs started in the same
    second never share a directory. Cached per process: Hydra may resolve the key more than once."""
    if base in _claimed:
        return _claimed[base]
    rank = int(os.environ.get("RANK", "0"))
    if rank != 0:  # under torchrun only rank 0 claims a run directory; the others learn it from rank 0
        return os.path.join(tempfile.gettempdir(), f"lmpt-rank{rank}-{os.getpid()}")
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


def help_reference() -> str:
    """Every config key with its description, for `lmpt --help` (escaped for Hydra's string.Template)."""
    from lmpt.config.reference import reference_text

    return reference_text().replace("$", "$$")


def help_groups() -> str:
    """`group: option, ...` for every folder of conf/ holding options, nested ones by path (hydra/launcher)."""
    from lmpt.config.store import conf_dir

    root = conf_dir()
    groups = sorted(p for p in root.rglob("*") if p.is_dir() and any(p.glob("*.yaml")))
    lines = [f"  {g.relative_to(root)}: {', '.join(sorted(f.stem for f in g.glob('*.yaml')))}" for g in groups]
    return "\n".join(lines)


def help_resumable() -> str:
    """The keys a resume may change, for `lmpt --help`."""
    import textwrap

    from lmpt.config.resume import MAY_CHANGE

    return textwrap.fill(", ".join(sorted(MAY_CHANGE)), width=110, initial_indent="  ", subsequent_indent="  ")


def gpu_count() -> int:
    """Sweep jobs at once for hydra/launcher=parallel: one per GPU, or one at a time without GPUs."""
    import torch

    return max(1, torch.cuda.device_count())


def register_resolvers() -> None:
    if not OmegaConf.has_resolver("lmpt.gpu_count"):
        OmegaConf.register_new_resolver("lmpt.gpu_count", gpu_count)
    if not OmegaConf.has_resolver("lmpt.groups"):
        OmegaConf.register_new_resolver("lmpt.groups", help_groups)
    if not OmegaConf.has_resolver("lmpt.unique_dir"):
        # cached: Hydra copies the cache into every sweep job's config, so launchers in other processes
        # (and a requeued SLURM job) see the same directory instead of claiming a new one
        OmegaConf.register_new_resolver("lmpt.unique_dir", unique_dir, use_cache=True)
    if not OmegaConf.has_resolver("lmpt.resumable"):
        OmegaConf.register_new_resolver("lmpt.resumable", help_resumable)
    if not OmegaConf.has_resolver("lmpt.reference"):
        OmegaConf.register_new_resolver("lmpt.reference", help_reference)
