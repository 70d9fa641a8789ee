"""Randomness as a function, not a state: every draw in the data path is seeded from its coordinates."""

from __future__ import annotations

import hashlib

import torch

_MASK63 = (1 << 63) - 1


def derive_seed(*coordinates: int | str) -> int:
    """A 63-bit seed that depends only on `coordinates`, e.g. (seed, "window", step, micro_step, rank)."""
    digest = hashlib.blake2b(repr(coordinates).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & _MASK63


def generator(*coordinates: int | str) -> torch.Generator:
    """A CPU generator seeded with `derive_seed(*coordinates)`."""
    g = torch.Generator()
    g.manual_seed(derive_seed(*coordinates))
    return g
