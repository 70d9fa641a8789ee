"""The reproductions' plans are timed at the development machine's measured rates (REFERENCE), not probed: the
laptop grids are designed to what its 2 cores finish in about 90 minutes, and a probe per model would add minutes to
every dry run of the suite. tests/study/test_rates.py runs the probe itself."""

from __future__ import annotations

import pytest

from lmpt.study import rates
from lmpt.study.rates import Rate

REFERENCE = {
    (16, 2048, 128): 2.3e10,
    (32, 2048, 128): 3.2e10,
    (64, 2048, 128): 4.8e10,
    (128, 2048, 128): 6.2e10,
    ("tiny", 2048, 128): 6.4e10,
    (64, 2048, 512): 4.2e10,
    (128, 2048, 512): 6.3e10,
    (16, 512, 128): 1.5e10,
    (32, 512, 128): 2.4e10,
    (64, 512, 128): 4.4e10,
}
"""Training FLOPs per second of a one-thread slot, by (width or model, vocabulary, window): fp32, measured on the
development machine (an Intel Xeon with AVX-512) by scripts/bench_small_models.py; a model not listed is taken at
the slowest rate."""
OVERHEAD_S = 10.0
"""Seconds a run took there beyond its steps (the repetition grid's 75 micro runs: 1,580 slot-seconds against 783
of training)."""


def reference_rate(keys: list[str], env: dict[str, str], cores: frozenset[int] | None = None) -> Rate:
    given = dict(k.split("=", 1) for k in keys if "=" in k)
    width: int | str = int(given["model.d_model"]) if "model.d_model" in given else given.get("model", "tiny")
    width = 64 if width == "micro" else width
    shape = (width, int(given.get("tokenizer.vocab_size", 2048)), int(given.get("data.seq_len", 128)))
    return Rate(REFERENCE.get(shape, min(REFERENCE.values())), OVERHEAD_S)


@pytest.fixture(autouse=True)
def _reference_rates(monkeypatch) -> None:
    monkeypatch.setattr(rates, "measured_rate", reference_rate)
