"""lmpt-study end to end: bad input refused before any work, a tiny study of two objectives (search, finals,
study.json and study.md), and a killed study resumed by the same command without redoing completed runs."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from runner import TINY_RUN, run_lmpt

TINY = [
    *TINY_RUN,
    "trainer.log_every=5",
    "scheduler.warmup_steps=2",
    "study.run_keys=[]",
]
STUDY = [
    *TINY,
    "study.objectives=[clm,mlm]",
    "study.seeds=[0]",
    "study.trials=2",
    "study.search_fraction=0.5",
    "trainer.budget=6e9flops",
]
TWO_BUDGETS = [*STUDY[:-1], "study.budgets=[3e9flops,6e9flops]"]
CURVES = ["trainer.eval_every=10", "downstream.score_every=10"]  # the finals take curve points, the search none


def run_study(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return run_lmpt(*args, cwd=cwd, command="lmpt-study", timeout=timeout)


def write_pairs(path: Path, n: int = 20) -> Path:
    """A minimal-pair task in BLiMP's format."""
    lines = [
        json.dumps({"sentence_good": f"The king is here {i}.", "sentence_bad": f"The king are here {i}."})
        for i in range(n)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["study.objectives=[clm,nope]", "trainer.budget=1e12flops"], "unknown objective 'nope'"),
        (["study.objectives=[]", "trainer.budget=1e12flops"], "study.objectives is empty"),
        (["study.seeds=[]", "trainer.budget=1e12flops"], "study.seeds is empty"),
        (
            [
                "study.objectives=[clm,electra]",
                "trainer.budget=1e12flops",
                "downstream.choice_tasks=[bundled:blimp-fast]",
            ],
            "electra cannot score the study's downstream tasks",
        ),
        (["trainer.budget=1e6flops"], "fewer than study.min_search_steps=10"),
        (["study.objectives=[clm]", "study.budgets=[]"], "give trainer.budget"),
        (["trainer.budget=1e12flops", "downstream.choice_tasks=[bad.jsonl]"], "downstream.choice_tasks[0]"),
        (["trainer.budget=1e12flops", "optimizer.lr=0.1"], "optimizer.lr is searched by the study"),
        (["trainer.budget=1e12flops", "study.trialz=3"], "unknown config key 'study.trialz'"),
        (["trainer.budget=1e12flops", "study.budgets=[1e12flops,2e12flops]"], "not both"),
        (["study.budgets=[1e12flops,2Mtokens]"], "study.budgets mixes units"),
        (["study.budgets=[1e12flops,1e12flops]"], "names a budget twice"),
        (["study.budgets=[1e12flops,lots]"], "study.budgets: trainer.budget=lots is not a budget"),
        (["trainer.budget=1e12flops", "+study.space={optimizer.lr:bogus}"], "optimizer.lr=bogus is no search range"),
        (["trainer.budget=1e12flops", "study.space={optimizer.lr:'interval(0.1, 0.01)'}"], "low end above its high"),
        (["trainer.budget=1e12flops", "study.space={optimizer.lrr:'interval(0.01, 0.1)'}"], "optimizer.lrr"),
        (["trainer.budget=1e12flops", 'study.space={trainer.seed:"choice(5,6)"}'], "searches trainer.seed, which"),
        (["trainer.budget=1e12flops", 'study.space={objective:"choice(mlm,span)"}'], "searches objective, which"),
        (["trainer.budget=1e12flops", 'study.space={optimizer.lr:"interval(0.01, inf)"}'], "not a finite number"),
        (
            ["trainer.budget=1e12flops", "study.space={optimizer.lr:'interval(-0.1, 0.1)'}"],
            "study.space: optimizer.lr=interval(-0.1, 0.1) reaches values lmpt refuses (optimizer.lr=-0.1 is invalid",
        ),
        (["trainer.budget=1e12flops", "study.sampler=tpe"], "study.sampler=tpe draws each trial from the trials"),
        (["study.budgets=[5min,10min]"], "a budget in minutes (5min, 10min) buys each objective what its speed"),
        (["trainer.budget=1e12flops", "hydra.run.dir=elsewhere"], "hydra.run.dir=elsewhere: lmpt-study launches"),
        (["trainer.budget=1e12flops", "--multirun"], "--multirun: lmpt-study runs its trials"),
        # the documented form of study.space (no '+') composes and passes its checks: refused only for its budget
        (
            ["trainer.budget=1e6flops", 'study.space={optimizer.lr:"tag(log, interval(0.001, 0.1))"}'],
            "fewer than study.min_search_steps=10",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "bad.jsonl").write_text(json.dumps({"question": "neither format"}) + "\n")
    before = set(tmp_path.iterdir())
    result = run_study(*TINY, *args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lmpt: error:") and message in lines[0], result.stderr
    assert set(tmp_path.iterdir()) == before


def test_a_stop_while_planning_that_a_library_turns_into_another_error_ends_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM can land while the plan composes its runs' OmegaConf configs, whose cleanup then raises an error of its
    own in place of the handler's exception: the study still ends in its one line and 75, and writes nothing."""
    from lmpt.study import plan as planning

    def interrupted_in_a_library(*args: object) -> None:
        try:
            signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)  # the handler lmpt-study installed, as it runs
        finally:
            raise AttributeError("'NoneType' object has no attribute '_invalidate_flags_cache'")

    monkeypatch.setattr(planning, "plan_study", interrupted_in_a_library)
    before = set(tmp_path.iterdir())
    result = run_study(*STUDY, "study.dir=s", cwd=tmp_path)
    assert result.returncode == 75, result.stderr
    assert result.stderr.strip().splitlines() == ["lmpt-study: stopped by SIGTERM while planning; nothing was written"]
    assert set(tmp_path.iterdir()) == before


def _metrics(run: Path) -> str:
    return (run / "metrics.jsonl").read_text()


@pytest.mark.soak  # ~50 s: the whole study end to end; CI runs its refusals
def test_a_tiny_study_searches_trains_records_and_resumes(tmp_path: Path) -> None:
    """Two budgets: the search at a share of the larger, every objective and seed at each, gains by budget."""
    write_pairs(tmp_path / "pairs.jsonl")
    start = time.time()
    result = run_study(*TWO_BUDGETS, *CURVES, "downstream.choice_tasks=[pairs.jsonl]", cwd=tmp_path)
    print(f"tiny study: {time.time() - start:.1f} s")
    assert result.returncode == 0, result.stderr[-3000:]
    study = tmp_path / "study"
    record = json.loads((study / "study.json").read_text())
    assert record["plan"]["trials_per_objective"] == 2 and set(record["plan"]["search_space"]) == {
        "optimizer.lr",
        "optimizer.adamw_lr",
    }
    for name in ("clm", "mlm"):
        objective = record["objectives"][name]
        trials = objective["search"]["trials"]
        assert len(trials) == 2 and all(t["status"] == "completed" and t["val_loss"] > 0 for t in trials)
        best = min(trials, key=lambda t: t["val_loss"])
        assert objective["search"]["chosen_recipe"] == best["recipe"] and set(best["recipe"]) == {
            "optimizer.lr",
            "optimizer.adamw_lr",
        }
        small, final = objective["finals"]
        assert (small["budget"], final["budget"]) == ("3e9flops", "6e9flops") and small["step"] < final["step"]
        assert final["status"] == "completed" and final["val_loss"] > 0
        assert final["epochs"] == json.loads((Path(final["run"]) / "status.json").read_text())["epochs"] > 0
        assert final["downstream"]["downstream/pairs/accuracy"] is not None and final["tasks"]["pairs"]["n"] == 20
        overrides = (Path(final["run"]) / ".hydra" / "overrides.yaml").read_text()
        assert all(f"{key}={value}" in overrides for key, value in best["recipe"].items())
        curve = [r for r in map(json.loads, _metrics(Path(final["run"])).splitlines()) if "curve/pairs/accuracy" in r]
        assert [r["step"] for r in curve][-1] == final["step"] and all(r["curve/pairs/n"] == 20 for r in curve)
    assert not any("curve/" in _metrics(trial) for trial in study.glob("search/*/trial-*"))
    assert record["ranking"]["key"] == "downstream/pairs/accuracy" and record["ranking"]["budget"] == "6e9flops"
    assert record["plan"]["search_budget"] == "3e+09flops" and record["plan"]["budgets"] == ["3e9flops", "6e9flops"]
    for budget in ("3e9flops", "6e9flops"):  # each run's pairs scored beside its untrained control, pooled
        gain = record["gains"][budget]["clm"]["pairs"]["accuracy"]
        assert gain["seeds"] == 1 and gain["interval"][0] <= gain["gain"] <= gain["interval"][1]
    assert record["verdicts"]["pairs/accuracy"].startswith("On pairs, ")
    markdown = (study / "study.md").read_text()
    assert "## Gain over the untrained control" in markdown and record["verdicts"]["pairs/accuracy"] in markdown
    assert "## Searches" in markdown and "(chosen)" in markdown and "## Final runs" in markdown
    assert "![curves](curves.png)" in markdown and (study / "curves.png").exists()

    # kill-like damage: one final run loses its status and model; the other final and every trial are kept
    clm, mlm = study / "runs" / "6e9flops" / "clm-seed0", study / "runs" / "6e9flops" / "mlm-seed0"
    assert (study / "runs" / "3e9flops" / "mlm-seed0" / "status.json").exists()
    (mlm / "status.json").unlink()
    (mlm / "model.safetensors").unlink()
    kept = {run: _metrics(run) for run in [clm, *(study / "search").glob("*/trial-*")]}
    again = run_study(*TWO_BUDGETS, *CURVES, "downstream.choice_tasks=[pairs.jsonl]", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "search clm: 2 trials done, reused" in again.stdout
    assert "final clm seed 0 at 6e9flops: completed, reused" in again.stdout
    assert all(_metrics(run) == text for run, text in kept.items())  # nothing completed was redone
    assert sorted(p.name for p in (study / "search" / "clm").iterdir()) == ["trial-0", "trial-1"]
    assert json.loads((mlm / "status.json").read_text())["status"] == "completed"
    assert (mlm / "model.safetensors").exists()
    resumed = json.loads((study / "study.json").read_text())
    assert resumed["objectives"]["mlm"]["finals"][1]["status"] == "completed"


@pytest.mark.soak  # ~50 s: a killed search; the tiny study's resume runs in CI
def test_a_search_killed_mid_way_runs_only_its_missing_trial(tmp_path: Path) -> None:
    """A study killed during its second trial (no status.json there, no final run yet): the rerun keeps the first
    trial and continues the second as the same recipe, in the same directory."""
    study_args = [*STUDY, "study.objectives=[clm]", "study.dir=s"]
    first = run_study(*study_args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    search = tmp_path / "s" / "search" / "clm"
    drawn = json.loads((tmp_path / "s" / "study.json").read_text())["plan"]["search_recipes"]
    assert json.loads((tmp_path / "s" / "recipes.json").read_text())["search_recipes"] == drawn  # written at planning
    (search / "trial-1" / "status.json").unlink()
    shutil.rmtree(tmp_path / "s" / "runs")
    text = _metrics(search / "trial-0")
    again = run_study(*study_args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert _metrics(search / "trial-0") == text
    record = json.loads((tmp_path / "s" / "study.json").read_text())
    trials = record["objectives"]["clm"]["search"]["trials"]
    assert [t["run"] for t in trials] == [str(search / "trial-0"), str(search / "trial-1")]
    assert [t["status"] for t in trials] == ["completed", "completed"]
    assert [t["recipe"] for t in trials] == drawn == record["plan"]["search_recipes"]
    assert record["objectives"]["clm"]["finals"][0]["status"] == "completed"


@pytest.mark.soak  # ~30 s: a one-objective study
def test_a_study_trains_the_recipes_its_folder_holds_not_the_draw(tmp_path: Path) -> None:
    """Issue 52: a study's recipes are read back from its folder (STUDY/recipes.json, written before its first run),
    so a study resumes with what it drew whatever lmpt's draw becomes: here recipes no draw of seed 0 gives."""
    from lmpt.study.plan import DEFAULT_SPACES

    planted = [
        {"optimizer.lr": "0.005", "optimizer.adamw_lr": "0.01"},
        {"optimizer.lr": "0.05", "optimizer.adamw_lr": "0.02"},
    ]
    space = DEFAULT_SPACES["muon"]
    (tmp_path / "s").mkdir()
    search = {"search_space": space, "trials_per_objective": 2, "search_seed": 0, "search_recipes": planted}
    (tmp_path / "s" / "recipes.json").write_text(json.dumps(search))
    result = run_study(*STUDY, "study.objectives=[clm]", "study.dir=s", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads((tmp_path / "s" / "study.json").read_text())
    assert record["plan"]["search_recipes"] == planted
    assert [t["recipe"] for t in record["objectives"]["clm"]["search"]["trials"]] == planted
    for k, recipe in enumerate(planted):  # each trial trained at its planted rates
        config = yaml.safe_load((tmp_path / "s" / "search" / "clm" / f"trial-{k}" / "config.yaml").read_text())
        assert [config["optimizer"]["lr"], config["optimizer"]["adamw_lr"]] == [float(v) for v in recipe.values()]


def test_a_study_directory_of_another_plan_is_refused(tmp_path: Path) -> None:
    (tmp_path / "study").mkdir()
    (tmp_path / "study" / "study.json").write_text(json.dumps({"plan": {"objectives": ["span"]}}))
    result = run_study(*STUDY, cwd=tmp_path)
    assert result.returncode == 2 and "holds another study (objectives" in result.stderr, result.stderr


def test_the_default_scale_reaches_every_run_and_the_command_line_wins_key_by_key() -> None:
    from omegaconf import OmegaConf

    from lmpt.study.plan import run_keys

    conf = OmegaConf.load(Path(__file__).resolve().parents[2] / "conf" / "study.yaml").study
    defaults = conf.run_keys
    assert list(conf.budgets) == ["3e12flops", "1e13flops"] and not any("trainer.budget" in k for k in defaults)
    tasks = "downstream.tasks=[bundled:blimp-fast,bundled:clinc-domains]"
    assert tasks in defaults and "downstream.weights=best" in defaults
    assert not any(k.startswith(("downstream.choice_tasks", "downstream.classification_tasks")) for k in defaults)
    study = OmegaConf.create({"run_keys": [*defaults, "model=tiny"]})
    keys = run_keys(study, ["trainer.budget=2e12flops", "study.trials=3", "model=small"])
    assert "model=tiny" not in keys and keys[-2:] == ["trainer.budget=2e12flops", "model=small"]
    assert "data=wikitext" in keys and tasks in keys
    assert not any(k.startswith("study.") for k in keys)
    # the tasks are one list, in either form: the command line's old key replaces the defaults' tasks
    keys = run_keys(study, ["downstream.choice_tasks=[pairs.jsonl]"])
    assert tasks not in keys and keys[-1] == "downstream.choice_tasks=[pairs.jsonl]"


def test_the_default_study_names_no_deprecated_key(tmp_path: Path) -> None:
    """The defaults' own keys raise no note about keys the user never typed (issue 63, point 10)."""
    result = run_study("trainer.dry_run=true", "study.trials=2", "study.seeds=[0]", "study.probe=false", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "choice_tasks" not in result.stdout + result.stderr


def test_a_study_begun_with_the_old_task_keys_resumes_as_it_was_launched(tmp_path: Path) -> None:
    from lmpt.study.plan import in_tasks_form, recorded_run_keys

    old = [
        "data=wikitext",
        "downstream.choice_tasks=[bundled:blimp-fast]",
        "downstream.classification_tasks=[bundled:clinc-domains]",
        "downstream.lr=search",
    ]
    new = ["data=wikitext", "downstream.tasks=[bundled:blimp-fast,bundled:clinc-domains]", "downstream.lr=search"]
    assert in_tasks_form(old) == new and in_tasks_form(new) == new
    (tmp_path / "study.json").write_text(json.dumps({"plan": {"run_overrides": old}}))
    assert recorded_run_keys(tmp_path, new) == old  # the same tasks: its runs keep their keys
    other = [new[0], "downstream.tasks=[bundled:clinc-domains]", new[2]]
    assert recorded_run_keys(tmp_path, other) == other  # other tasks: refused later as another study
    assert recorded_run_keys(tmp_path / "none", new) == new


def test_study_md_states_one_weights_rule_for_every_objective() -> None:
    from lmpt.study.record import weights_rule

    assert "best weights by validation loss" in weights_rule("best")
    assert "last weights" in weights_rule("last")


def test_an_unquoted_search_expression_is_told_to_quote_it(tmp_path: Path) -> None:
    result = run_study("study.space={optimizer.lr:interval(0.01,0.1)}", "trainer.dry_run=true", cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "quote it as a string" in result.stderr and "Unexpected type annotation" not in result.stderr
    assert list(tmp_path.iterdir()) == []
