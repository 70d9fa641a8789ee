"""A run's rate on this machine (lmpt.study.rates): read from a probe's own records, keyed by what shapes a step,
cached with the faster measurement kept, never cached from a busy machine. The probe itself runs in
tests/study/test_study_dry_run.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmpt.study import rates
from lmpt.study.rates import RATES, Rate, rate_from_records, shape_of


def _records(steps: int, every: int, step_s: float, flops_per_step: float) -> list[dict]:
    return [
        {"step": s, "interval_s": every * step_s, "flops": s * flops_per_step} for s in range(every, steps + 1, every)
    ]


def test_the_rate_leaves_out_the_warm_up_and_the_overhead_is_the_rest_of_the_wall_time() -> None:
    records = _records(60, 2, 0.01, 1e9)
    records[0]["interval_s"] = 1.0  # the first steps: allocation and first kernels
    records.append({"step": 60, "val_loss": 3.0, "flops": 60e9})  # the final evaluation logs no interval
    rate = rate_from_records(records, wall_s=8.0)
    assert rate.flops_per_s == pytest.approx(1e11)  # steps 11-60 at 0.01 s each
    assert rate.overhead_s == pytest.approx(8.0 - (1.0 + 29 * 0.02))
    assert rate.seconds(2e11) == pytest.approx(2.0 + rate.overhead_s)


def test_a_probe_stopped_at_its_limit_is_measured_over_the_steps_it_logged() -> None:
    records = _records(8, 2, 5.0, 1e12)  # a model too slow for the probe's steps in its time
    rate = rate_from_records(records, wall_s=50.0, finished=False)
    assert rate.flops_per_s == pytest.approx(2e11)
    assert rate.overhead_s == pytest.approx(50.0 - 40.0 - 5.0)  # half a logged interval was in flight
    with pytest.raises(Exception, match="no timed step in 45 s"):
        rate_from_records([], wall_s=45.0, finished=False)


def test_only_the_keys_that_shape_a_step_name_a_rate() -> None:
    keys = [
        "objective=clm",
        "data=tinystories",
        "tokenizer.vocab_size=512",
        "data.seq_len=128",
        "trainer.batch_size=16",
        "model=micro",
        "model.d_model=32",
        "objective.mask_prob=0.2",
        "data.unique_tokens=250000",
        "trainer.max_steps=976",
        "scheduler.warmup_steps=97",
        "optimizer.lr=0.01",
        "trainer.seed=3",
        "trainer.amp=true",
    ]
    assert shape_of(keys) == [
        "objective=clm",
        "tokenizer.vocab_size=512",
        "data.seq_len=128",
        "trainer.batch_size=16",
        "model=micro",
        "model.d_model=32",
        "objective.mask_prob=0.2",
        "trainer.amp=true",
    ]


def test_the_cache_keeps_the_faster_rate_and_survives_a_damaged_file(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LMPT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(rates, "_busy", lambda env: None)
    probes = []
    monkeypatch.setattr(rates, "probe", lambda shape, env, cores=None: probes.append(shape) or Rate(1e10, 5.0))
    keys, env = ["objective=clm", "model=tiny", "trainer.seed=0"], {"LMPT_THREADS": "1"}
    assert rates.measured_rate(keys, env) == Rate(1e10, 5.0)
    assert rates.measured_rate([*keys[:2], "trainer.seed=1"], env) == Rate(1e10, 5.0)  # another seed: the same model
    assert probes == [["objective=clm", "model=tiny"]]
    path = tmp_path / RATES.name
    key = next(iter(RATES.read(path)))
    RATES.keep(path, key, {"flops_per_s": 5e9, "overhead_s": 1.0})  # slower: not kept
    assert RATES.read(path)[key]["flops_per_s"] == 1e10
    RATES.keep(path, key, {"flops_per_s": 2e10, "overhead_s": 4.0})
    assert RATES.read(path)[key]["flops_per_s"] == 2e10
    path.write_text("{not json")
    assert RATES.read(path) == {}
    assert rates.measured_rate(keys, env) == Rate(1e10, 5.0) and len(probes) == 2  # measured again, rewritten
    assert json.loads(path.read_text())["rates"]


def test_a_rate_measured_while_other_work_runs_is_said_and_not_cached(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("LMPT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(rates, "_busy", lambda env: "other work keeps 2.0 of this machine's 2 cores busy")
    monkeypatch.setattr(rates, "probe", lambda shape, env, cores=None: Rate(1e9, 5.0))
    assert rates.measured_rate(["model=tiny"], {"LMPT_THREADS": "1"}) == Rate(1e9, 5.0)
    assert "reads low and is not cached" in capsys.readouterr().out
    assert not Path(tmp_path / RATES.name).exists()


def test_a_probe_that_fails_leaves_the_plan_without_a_measured_rate(tmp_path, monkeypatch, capsys) -> None:
    from lmpt.errors import LmptError

    monkeypatch.setenv("LMPT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(rates, "_busy", lambda env: None)

    def failing(shape, env, cores=None):
        raise LmptError("the probe run of model=tiny failed: out of memory")

    monkeypatch.setattr(rates, "probe", failing)
    assert rates.measured_rate(["model=tiny"], {}) is None
    assert "no measured rate for model=tiny: the probe run of model=tiny failed" in capsys.readouterr().out
