"""`lmpt trainer.resume=RUN` composes RUN's own configuration; the command line may change only MAY_CHANGE keys.
The run directories here hold what a launch writes (config.yaml and Hydra's .hydra/hydra.yaml), composed for
real; tests/train/test_resume_command.py resumes a trained run end to end."""

from __future__ import annotations

from pathlib import Path

import pytest
from composed import composed
from omegaconf import OmegaConf

from lmpt.config.resume import MAY_CHANGE, resumed_argv, resumed_overrides
from lmpt.errors import LmptError

ORIGINAL = ["objective=mlm", "model.n_layers=1", "trainer.seed=7", "optimizer.lr=3e-4", "trainer.max_steps=3"]


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # composing Hydra's own config claims outputs/ and multirun/ directories


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """A run directory as `lmpt ORIGINAL hydra.run.dir=RUN` leaves it (config.yaml, .hydra/hydra.yaml)."""
    path = tmp_path / "run"
    (path / ".hydra").mkdir(parents=True)
    cfg = composed(*ORIGINAL, return_hydra_config=True)
    record = {"hydra": {"runtime": {"choices": cfg.hydra.runtime.choices}}}  # what resuming reads of hydra.yaml
    (path / ".hydra" / "hydra.yaml").write_text(OmegaConf.to_yaml(record))
    (path / "config.yaml").write_text(OmegaConf.to_yaml(without_hydra(cfg)))
    return path


def without_hydra(cfg) -> dict:
    return {k: OmegaConf.to_container(cfg[k], resolve=True) for k in cfg if k != "hydra"}


def resumed(*overrides: str):
    cfg = composed(*resumed_overrides(list(overrides)), return_hydra_config=True)
    return cfg, cfg.hydra


@pytest.mark.parametrize("how", ["trainer.resume={run}", "hydra.run.dir={run}", "trainer.resume={run}/checkpoints/x"])
def test_naming_the_run_composes_its_own_config(run: Path, how: str) -> None:
    (run / "checkpoints" / "x").mkdir(parents=True)
    cfg, hydra = resumed(how.format(run=run))
    assert OmegaConf.get_type(cfg.objective).__name__ == "MlmConfig"  # typed by the run's own group option
    assert (cfg.model.n_layers, cfg.trainer.seed, cfg.optimizer.lr, cfg.trainer.max_steps) == (1, 7, 3e-4, 3)
    composed, saved = without_hydra(cfg), OmegaConf.to_container(OmegaConf.load(run / "config.yaml"))
    composed["trainer"]["resume"] = saved["trainer"]["resume"]
    assert composed == saved
    assert Path(hydra.run.dir) == run and hydra.output_subdir is None  # RUN/.hydra keeps the original launch


def test_a_retyped_relative_path_means_the_saved_resolved_one(run: Path, tmp_path: Path) -> None:
    saved = OmegaConf.load(run / "config.yaml")
    saved.tokenizer.model_file = str(tmp_path / "tok.model")  # as lmpt saves a path it resolved
    (run / "config.yaml").write_text(OmegaConf.to_yaml(saved))
    resumed_overrides([f"hydra.run.dir={run}", "tokenizer.model_file=tok.model"])  # cwd is tmp_path
    with pytest.raises(LmptError, match="tokenizer.model_file=other.model"):
        resumed_overrides([f"hydra.run.dir={run}", "tokenizer.model_file=other.model"])


def test_allowed_keys_change_and_retyped_ones_are_accepted(run: Path) -> None:
    cfg, _ = resumed(
        f"trainer.resume={run}", "trainer.max_steps=9", "data.num_workers=2", "trainer.log_every=1", *ORIGINAL[:-1]
    )  # the original command retyped (a SLURM requeue) changes nothing
    assert (cfg.trainer.max_steps, cfg.data.num_workers, cfg.trainer.log_every, cfg.trainer.seed) == (9, 2, 1, 7)


def test_a_key_given_twice_is_judged_by_its_last_value(run: Path) -> None:
    """A study's search run repeats its downstream keys (`X=[...]` then `X=[]`): the run composed the last, so
    the resume compares the last and the repeated command resumes instead of being refused forever."""
    cfg, _ = resumed(f"hydra.run.dir={run}", "trainer.seed=8", "trainer.seed=7", "optimizer.lr=1", *ORIGINAL[3:])
    assert (cfg.trainer.seed, cfg.optimizer.lr) == (7, 3e-4)
    with pytest.raises(LmptError, match="trainer.seed=8"):
        resumed_overrides([f"hydra.run.dir={run}", "trainer.seed=7", "trainer.seed=8"])


@pytest.mark.parametrize(
    "override,named",
    [
        ("trainer.seed=8", "trainer.seed=8"),
        ("optimizer.lr=1e-3", "optimizer.lr=0.001"),
        ("objective=clm", "objective=clm"),
        ("model.d_model=64", "model.d_model=64"),
        ("~trainer.seed", "~trainer.seed"),
        ("data.seq_len=32", "data.seq_len=32"),
    ],
)
def test_changing_what_the_run_is_is_refused_naming_the_key(run: Path, override: str, named: str) -> None:
    with pytest.raises(LmptError, match=rf"^{named}: {run} continues with .*start a new run"):
        resumed_overrides([f"hydra.run.dir={run}", override])


def test_a_new_run_and_a_sweep_are_not_rewritten(run: Path, tmp_path: Path) -> None:
    fresh = [f"hydra.run.dir={tmp_path / 'new'}", "trainer.seed=8"]
    assert resumed_overrides(fresh) == fresh
    sweep = ["lmpt", "-m", f"hydra.run.dir={run}", "trainer.seed=8,9"]
    assert resumed_argv(sweep) == sweep
    argv = resumed_argv(["lmpt", "--cfg", "job", f"trainer.resume={run}"])
    assert argv[:3] == ["lmpt", "--cfg", "job"] and "objective=mlm" in argv


def test_may_change_keys_exist_in_the_schema() -> None:
    cfg = composed(return_hydra_config=True)
    for key in MAY_CHANGE:
        assert OmegaConf.select(cfg, key, default="absent") != "absent", key
