"""Start-up checks of objective settings: each failure is one LmptError line naming the key."""

from __future__ import annotations

from lmpt.errors import LmptError


def require_open_unit(value: float, key: str) -> float:
    """`key` must lie strictly between 0 and 1."""
    value = float(value)
    if not 0.0 < value < 1.0:
        raise LmptError(f"{key}={value:g} must be in (0, 1)")
    return value


def require_fraction(value: float, key: str) -> float:
    """`key` must lie in [0, 1]."""
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise LmptError(f"{key}={value:g} must be in [0, 1]")
    return value


def require_at_least(value: float, key: str, minimum: float) -> float:
    """`key` must be at least `minimum`."""
    value = float(value)
    if not value >= minimum:
        raise LmptError(f"{key}={value:g} must be >= {minimum:g}")
    return value
