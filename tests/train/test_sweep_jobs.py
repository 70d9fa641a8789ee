"""Each job of a sweep says which it is before it starts: `job 2/3: KEY=VALUE ...`, the total counted as Hydra's basic
sweeper counts it, and only `job N` under a sweeper that decides as it goes (optuna)."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf
from runner import SMALL, run_lmpt

from lmpt.app import job_header

TINY_RUN = [*SMALL, "model.n_layers=1", "trainer.max_steps=1", "trainer.sample_tokens=0", "trainer.eval_batches=1"]


def test_each_job_of_a_sweep_names_its_place_and_its_swept_values(tmp_path: Path) -> None:
    result = run_lmpt("-m", "trainer.seed=1,2", *TINY_RUN, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    headers = [line for line in lines if line.startswith("job ")]
    assert headers == ["job 1/2: trainer.seed=1", "job 2/2: trainer.seed=2"]  # the keys every job shares left out
    # each before its own job's first line
    runs = [i for i, line in enumerate(lines) if line.startswith("run directory:")]
    assert lines.index(headers[0]) < runs[0] < lines.index(headers[1]) < runs[1]


def _hydra(sweep_dir: Path, sweeper: str, num: int, task: list[str]) -> DictConfig:
    return OmegaConf.create(
        {
            "sweeper": {"_target_": sweeper},
            "sweep": {"dir": str(sweep_dir)},
            "job": {"num": num},
            "overrides": {"task": task},
        }
    )


def test_the_total_follows_the_basic_sweepers_product_and_params(tmp_path: Path) -> None:
    OmegaConf.save(
        {
            "hydra": {
                "sweeper": {"params": {"optimizer.lr": "0.1,0.2"}},
                "overrides": {"task": ["objective=clm,mlm,span", "model.n_layers=range(1,3)", "trainer.seed=3"]},
            }
        },
        tmp_path / "multirun.yaml",
    )
    basic = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"
    task = ["optimizer.lr=0.2", "objective=mlm", "model.n_layers=2", "trainer.seed=3"]
    assert job_header(_hydra(tmp_path, basic, 7, task)) == "job 8/12: optimizer.lr=0.2 objective=mlm model.n_layers=2"


def test_a_sweeper_that_decides_as_it_goes_gets_no_total(tmp_path: Path) -> None:
    optuna = "hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper"
    assert job_header(_hydra(tmp_path, optuna, 2, ["optimizer.lr=0.003"])) == "job 3: optimizer.lr=0.003"


def test_an_unreadable_sweep_record_leaves_the_place_and_every_override(tmp_path: Path) -> None:
    (tmp_path / "multirun.yaml").write_text("hydra: [unclosed\n")
    basic = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"
    assert job_header(_hydra(tmp_path, basic, 0, ["a=1", "b=2"])) == "job 1: a=1 b=2"


def test_a_dry_run_sweep_plans_every_job_and_leaves_no_folder(tmp_path: Path) -> None:
    """Each job of `lmpt -m ... trainer.dry_run=true` prints its plan; the sweep leaves no empty multirun folder
    behind and no "summary skipped" line (issue 63, point 18)."""
    done = run_lmpt("-m", *SMALL, "trainer.dry_run=true", "trainer.max_steps=10,20", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("plan (dry run: nothing trained)") == 2 and "skipped" not in done.stdout
    assert list(tmp_path.iterdir()) == []
