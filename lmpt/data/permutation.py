"""A keyed pseudo-random permutation of [0, n) in O(1) memory: a balanced Feistel network on the smallest
power of four >= n, cycle-walked back into range. permute(i) is computed on demand, so the sampler holds no
permutation array however many windows the corpus has (an int64 array of 1e8 windows would be 800 MB)."""

from __future__ import annotations

import numpy as np

ROUNDS = 6
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_GOLDEN = 0x9E3779B97F4A7C15
_MASK64 = (1 << 64) - 1


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a fast bijective scrambling of 64-bit words (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


class FeistelPermutation:
    """A bijection of [0, n) chosen by `key` (a 63-bit integer); the same (n, key) always give the same one."""

    def __init__(self, n: int, key: int) -> None:
        if n < 1:
            raise ValueError(f"a permutation needs n >= 1, got {n}")
        self.n = n
        bits = max(2, (n - 1).bit_length())
        self._half = np.uint64((bits + 1) // 2)  # both halves this wide: the domain is 4**half >= n
        self._mask = np.uint64((1 << int(self._half)) - 1)
        self._round_keys = _mix(np.array([(key + r * _GOLDEN) & _MASK64 for r in range(1, ROUNDS + 1)], np.uint64))

    def _rounds(self, x: np.ndarray) -> np.ndarray:
        left, right = x >> self._half, x & self._mask
        for k in self._round_keys:  # SplitMix64's stream from `key`
            left, right = right, left ^ (_mix(right ^ k) & self._mask)
        return (left << self._half) | right

    def __call__(self, indices: np.ndarray) -> np.ndarray:
        """The images of `indices` (each in [0, n)) as int64."""
        x = np.asarray(indices, dtype=np.int64)
        if x.size and (x.min() < 0 or x.max() >= self.n):
            raise IndexError(f"index outside [0, {self.n})")
        y = self._rounds(x.astype(np.uint64))
        outside = y >= np.uint64(self.n)
        while outside.any():  # cycle walking: a permutation of the domain maps back into [0, n) in a few rounds
            y[outside] = self._rounds(y[outside])
            outside = y >= np.uint64(self.n)
        return y.astype(np.int64)
