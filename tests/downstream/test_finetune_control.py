"""lmpt-finetune's scratch control and recipe search (issue 36) on a tiny mlm encoder pre-trained once by the real CLI:
the control's figures, the gain with its paired interval and the bag-of-words row; the control really is the run's
architecture freshly initialised; lr=search reads only the training split and records what it chose; and every bad
setting of the two is one line, exit 2, before any training, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from finetune_commands import pretrained, refused
from runner import TINY_RUN

from lmpt.downstream import control_cache, recipe, seeds
from lmpt.downstream import finetune as finetune_module
from lmpt.downstream.control import scratch_model
from lmpt.downstream.encoding import encode_task
from lmpt.downstream.finetune_cli import finetune_command
from lmpt.downstream.kinds.classification import ClassificationResult
from lmpt.downstream.labelled import read_labelled
from lmpt.downstream.labelled_files import TaskData
from lmpt.downstream.recipe import search_slice
from lmpt.downstream.significance import paired_gain
from lmpt.downstream.target import CLASSES
from lmpt.objectives.registry import build_objective
from lmpt.rng import derive_seed
from lmpt.rundir.trained import load_trained

REPO = Path(__file__).resolve().parents[2]
TINY = [
    *TINY_RUN,
    "trainer.max_steps=2",
    "objective=mlm",
]
FAST = ["seeds=2", "max_steps=2", "batch_size=16", "seq_len=24", "lr_grid=[1e-4,1e-3]"]
KEPT = '{"kept": true}\n'


def logged_figures(record: dict) -> dict[str, float]:
    return ClassificationResult.from_json(record).logged()  # what a fine-tuning logs after training


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny mlm encoder (an encoder: its search tries both poolings)."""
    return pretrained(tmp_path_factory, TINY)


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """130 training, 40 dev and 40 test sentences of the shipped word-order task; `flipped`: dev with every label
    flipped (a dev split that would turn any choice made on it upside down)."""
    shipped, root = REPO / "lmpt" / "tasks" / "shakespeare-order", tmp_path_factory.mktemp("task")
    files = {}
    for split, n in {"train": 130, "dev": 40, "test": 40}.items():
        files[split] = str(root / f"{split}.jsonl")
        lines = (shipped / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()[:n]
        Path(files[split]).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    rows = [json.loads(line) for line in Path(files["dev"]).read_text().splitlines()]
    files["flipped"] = str(root / "flipped.jsonl")
    Path(files["flipped"]).write_text("".join(json.dumps({**r, "label": 1 - r["label"]}) + "\n" for r in rows))
    return files


def _data(task: dict[str, str], dev: str = "dev") -> list[str]:
    return [f"data.train={task['train']}", f"data.dev={task[dev]}", f"data.test={task['test']}"]


def _json(argv: list[str], capsys: pytest.CaptureFixture) -> dict:
    finetune_command([*argv, "json=true"])
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    return json.loads(out)


def _fresh_state(trained, seed: int) -> dict[str, torch.Tensor]:
    """The run's objective builds its model from the run's config, seeded as a run's initialisation is."""
    config = trained.config
    objective = build_objective(config.objective, trained.tokenizer, int(config.data.seq_len), str(config.model.arch))
    torch.manual_seed(derive_seed(seed, "init"))
    return objective.build_model(config.model, trained.model.vocab_size).state_dict()


def test_control_scratch_reports_both_figures_the_gain_and_the_bag_of_words_row(run, task, capsys, monkeypatch):
    initial = {}

    def spied(trained, seed=None):
        model = scratch_model(trained, seed)
        initial.update({k: v.clone() for k, v in model.state_dict().items()})  # before it is fine-tuned
        return model

    monkeypatch.setattr(finetune_module, "scratch_model", spied)
    out = _json([str(run), *_data(task), *FAST, "control=scratch", "task=control"], capsys)
    trained = load_trained(run)
    fresh = _fresh_state(trained, int(trained.config.trainer.seed))
    assert initial.keys() == fresh.keys() and all(torch.equal(initial[k], fresh[k]) for k in fresh)

    scratch, bow, gains = out["scratch"], out["bag_of_words"], out["gain"]
    assert out["control"] == "scratch" and scratch["init_seed"] == trained.config.trainer.seed
    assert [r["seed"] for r in scratch["per_seed"]] == [r["seed"] for r in out["per_seed"]] == [0, 1]
    assert scratch["search"]["held_out"] == out["search"]["held_out"] == 20  # the same slice, searched again
    for figure in ("accuracy", "test_accuracy"):
        gain = gains[figure]
        assert gain["pretrained"] == pytest.approx(out[f"{figure}_mean"])
        assert gain["scratch"] == pytest.approx(scratch[f"{figure}_mean"])
        assert gain["gain"] == pytest.approx(gain["pretrained"] - gain["scratch"])
        low, high = gain["interval"]
        assert low <= gain["gain"] <= high and gain["significant"] == (low > 0 or high < 0)
        assert (gain["seeds"], gain["items"], gain["level"]) == (2, 40, 0.95)
        assert 0 <= bow[figure] <= 1
    assert json.loads(Path(out["record"]).read_text()) == out  # a hand run's record (test_hand_records.py)
    assert logged_figures(out)["accuracy_gain"] == gains["accuracy"]["gain"]
    assert logged_figures(out)["bow_accuracy"] == bow["accuracy"]

    ClassificationResult.from_json({**out, "record": "R"}).render()
    shown_on = capsys.readouterr()  # the json=true command above moved the console to stderr for its process
    table = shown_on.out + shown_on.err
    for shown in ("pre-trained mlm", "scratch encoder", "bag of words", "majority class", "gain [95%]"):
        assert shown in table, table
    assert "significant" in table and "held back from train (never dev)" in table


def test_scratch_model_weights_differ_from_the_run_and_equal_a_fresh_seeded_build(run) -> None:
    trained = load_trained(run)
    seed = int(trained.config.trainer.seed)
    scratch, fresh = scratch_model(trained).state_dict(), _fresh_state(trained, seed)
    assert scratch.keys() == trained.model.state_dict().keys()
    assert all(torch.equal(scratch[k], fresh[k]) for k in scratch)
    assert not torch.equal(scratch["body.embed.tokens.weight"], trained.model.state_dict()["body.embed.tokens.weight"])
    other = scratch_model(trained, seed + 1).state_dict()
    assert not torch.equal(other["body.embed.tokens.weight"], scratch["body.embed.tokens.weight"])


def test_lr_search_reads_only_the_training_split_and_records_its_choice(run, task, capsys, monkeypatch) -> None:
    seen: list = []
    original = recipe.run_seeds

    def spied(plan, splits, probe, seeds, bar, **named):
        if "recipe search" in named.get("phase", ""):  # a candidate of the search (not the final runs, on dev)
            seen.append(splits)
        return original(plan, splits, probe, seeds, bar, **named)

    monkeypatch.setattr(recipe, "run_seeds", spied)
    base = [str(run), *FAST, "seeds=1", "control=none"]
    out = _json([*base, *_data(task), "task=searched"], capsys)
    trained = load_trained(run)
    task_rows = encode_task(trained, read_labelled(TaskData(task["train"], task["dev"]), "searched"), 24, CLASSES)
    assert len(seen) == 4  # 2 learning rates x 2 poolings, one seed each
    fit, held = search_slice(130, 0.15, 0)
    for splits in seen:
        assert set(splits) == {"train", ""}
        assert [r.tolist() for r in splits["train"].rows] == [task_rows.train.rows[i].tolist() for i in fit]
        assert [r.tolist() for r in splits[""].rows] == [task_rows.train.rows[i].tolist() for i in held]
        assert splits[""].labels.tolist() == task_rows.train.labels[held].tolist()
    search = out["search"]
    assert (search["held_out"], search["trained_on"], search["seed"], search["epochs"]) == (20, 110, 0, 1)
    assert [(c["lr"], c["pooling"]) for c in search["candidates"]] == [
        (1e-4, "mean"),
        (1e-3, "mean"),
        (1e-4, "first"),
        (1e-3, "first"),
    ]
    best = max(c["accuracy"] for c in search["candidates"])
    chosen = next(c for c in search["candidates"] if c["accuracy"] == best)
    assert (out["lr"], out["pooling"]) == (search["lr"], search["pooling"]) == (chosen["lr"], chosen["pooling"])
    assert json.loads(Path(out["record"]).read_text())["search"] == search  # the hand run's record
    flipped = _json([*base, *_data(task, dev="flipped"), "task=flipped"], capsys)
    assert flipped["search"] == search  # a dev split that says the opposite changes nothing in the choice
    assert flipped["accuracy_mean"] == pytest.approx(1 - out["accuracy_mean"])


def test_a_fixed_recipe_is_not_searched(run, task, capsys) -> None:
    out = _json([str(run), *_data(task), *FAST, "seeds=1", "control=none", "lr=3e-4", "task=fixed"], capsys)
    assert (out["lr"], out["pooling"]) == (3e-4, "mean") and "search" not in out and "scratch" not in out


def test_search_slice_is_seeded_disjoint_and_whole() -> None:
    fit, held = search_slice(200, 0.15, 3)
    assert (fit, held) == search_slice(200, 0.15, 3) and search_slice(200, 0.15, 4) != (fit, held)
    assert len(held) == 30 and sorted(fit + held) == list(range(200))


def test_paired_gain_is_zero_for_twins_and_significant_for_a_clear_winner() -> None:
    rng = np.random.default_rng(0)
    a = rng.random((3, 200)) < 0.6
    same = paired_gain(a, a)
    assert same["gain"] == 0 and same["interval"] == [0.0, 0.0] and not same["significant"]
    better = paired_gain(np.ones((3, 200), bool), a)
    assert better["gain"] == pytest.approx(1 - a.mean()) and better["significant"] and better["interval"][0] > 0
    assert paired_gain(a, ~a) == paired_gain(a, ~a)  # seeded: the same interval every time


BAD = {
    "control=bogus": "control=bogus is unknown: use scratch or none",
    "search_fraction=0.3": "leaves 91, fewer than 100",
    "lr_grid=[]": "lr_grid=[] is empty",
    "lr_grid=[1e-3,-1e-4]": "lr_grid holds -1e-4",
    "lr_grid=[0]": "lr_grid holds 0",
    "pooling=last": "pooling=last does not fit a encoder",
    "lr=fast": "lr=fast is not a learning rate",
}


@pytest.mark.parametrize("setting", list(BAD))
def test_bad_control_and_search_settings_are_one_line_before_any_training(run, task, setting, capsys, monkeypatch):
    def no_training(*args, **kwargs):
        raise AssertionError("trained before refusing")

    monkeypatch.setattr(seeds, "train_seed", no_training)
    record = run / "downstream" / "kept.json"
    record.parent.mkdir(exist_ok=True)
    record.write_text(KEPT)
    argv = [str(run), *_data(task), *FAST, setting, "task=kept"]
    assert BAD[setting] in refused(argv, capsys, monkeypatch)
    assert record.read_text() == KEPT


def test_one_control_is_fine_tuned_once_and_shared_by_every_run_that_has_it(run, task, capsys, monkeypatch) -> None:
    """The second fine-tuning with the same control (fresh weights, task tokens, recipe, code) reads it back, the
    same figures bit for bit, without training it; another recipe, or an entry that cannot be read, trains it."""

    monkeypatch.setenv("LMPT_CACHE_DIR", str(run.parent / "shared-cache"))
    argv = [str(run), *_data(task), *FAST, "lr=1e-3", "pooling=first"]
    first = _json(argv, capsys)
    trained_bodies = []
    real_tune = finetune_module.tune
    monkeypatch.setattr(
        finetune_module, "tune", lambda body, *a, **k: trained_bodies.append(body) or real_tune(body, *a, **k)
    )
    second = _json(argv, capsys)
    assert len(trained_bodies) == 1  # the run's model only: the control was read back
    assert (first["scratch"]["shared"], second["scratch"]["shared"]) == (False, True)
    assert first["scratch"]["key"] == second["scratch"]["key"]
    assert {**first["scratch"], "shared": True} == second["scratch"] and first["gain"] == second["gain"]
    entry = control_cache.controls_dir() / f"{first['scratch']['key']}.json"
    entry.write_text("{not json")
    third = _json(argv, capsys)
    assert not third["scratch"]["shared"] and third["gain"] == first["gain"] and len(trained_bodies) == 3
    other = _json([*argv[:-2], "lr=3e-3", "pooling=first"], capsys)
    assert not other["scratch"]["shared"] and other["scratch"]["key"] != first["scratch"]["key"]


def _stored(run: Path, argv: list[str], capsys: pytest.CaptureFixture) -> tuple[dict, Path]:
    """A fine-tuning whose control is stored in a cache of its own; (its JSON, the entry's file)."""

    first = _json(argv, capsys)
    return first, control_cache.controls_dir() / f"{first['scratch']['key']}.json"


def _rewrite(entry: Path, change, digest: bool) -> None:
    """The entry with `change` applied to its control; `digest`: its digest recomputed (a forger who knows how)."""
    from lmpt.downstream.control_cache import content_digest

    data = json.loads(entry.read_text())
    change(data["control"])
    if digest:
        data["digest"] = content_digest(data["control"])
    entry.write_text(json.dumps(data))


def _flip_to_wrong(control: dict) -> None:
    """The tampering that turned a nil gain into a significant one: every seed's accuracy 0, every item wrong."""
    for row in control["runs"]["per_seed"]:
        row["accuracy"] = row["test_accuracy"] = 0.0
    control["runs"]["correct"] = {k: ["0" * len(r) for r in rows] for k, rows in control["runs"]["correct"].items()}


def _too_short(control: dict) -> None:
    control["runs"]["correct"][""] = [r[:-1] for r in control["runs"]["correct"][""]]


def _figure_as_text(control: dict) -> None:
    control["runs"]["per_seed"][0]["accuracy"] = str(control["runs"]["per_seed"][0]["accuracy"])


def _steps_as_text(control: dict) -> None:
    control["steps"] = str(control["steps"])


@pytest.mark.parametrize(
    ("change", "digest", "said"),
    [
        (_flip_to_wrong, False, "does not match its digest (changed after it was stored)"),
        (_too_short, True, "has per-item outcomes [39, 39] for dev, where 2 string(s) of 40 '0'/'1' were stored"),
        (_figure_as_text, True, "has runs.per_seed[0].accuracy = '"),
        (_steps_as_text, True, "has steps = '"),
    ],
    ids=["tampered", "outcomes-too-short", "figure-as-string", "steps-as-string"],
)
def test_a_tampered_or_malformed_cached_control_is_named_in_one_line_and_trained_again(
    run, task, change, digest: bool, said: str, capsys, monkeypatch
) -> None:
    """The entry carries a digest of its own content, checked on reading, and every field is checked against the
    task: a changed or malformed entry is never trusted nor a traceback; one line names it, the control is
    fine-tuned again (the same figures as at first) and the entry replaced."""
    monkeypatch.setenv("LMPT_CACHE_DIR", str(run.parent / f"cache-{change.__name__}"))
    argv = [str(run), *_data(task), *FAST, "lr=1e-3", "pooling=first"]
    first, entry = _stored(run, argv, capsys)
    assert first["scratch"]["entry_digest"] == json.loads(entry.read_text())["digest"]
    _rewrite(entry, change, digest)

    finetune_command([*argv, "json=true"])
    shown = capsys.readouterr()
    again = json.loads(shown.out)  # stdout: the JSON alone
    (line,) = shown.err.splitlines()
    assert line.startswith(f"lmpt: warning: the shared control {entry} ") and said in line, line
    assert line.endswith("fine-tuning the control again in its place")
    assert not again["scratch"]["shared"] and again["gain"] == first["gain"]  # never the tampered figures
    assert json.loads(entry.read_text())["digest"] == again["scratch"]["entry_digest"]  # replaced by a sound one
    assert _json(argv, capsys)["scratch"]["shared"]  # and read back next time
