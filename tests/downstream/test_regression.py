"""The regression task kind: one module found by the registry, its figures (Pearson, Spearman, MSE) checked against
scipy and numpy, its ridge floor against scikit-learn, a label that is not a number refused naming its file and line,
and a tiny pre-trained run fine-tuned with a one-output head beside its scratch control."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from finetune_commands import pretrained, refused
from scipy.stats import pearsonr, spearmanr

from lmpt.downstream.figures import MSE, PEARSON, PEARSON_MEAN, SPEARMAN
from lmpt.downstream.finetune_cli import finetune_command
from lmpt.downstream.kinds.regression import Regression, RegressionResult, regression_scores, ridge_floor
from lmpt.downstream.labelled import read_labelled
from lmpt.downstream.labelled_files import Example, TaskData
from lmpt.downstream.records import read_record
from lmpt.downstream.task import kind_of, kinds, read_result
from lmpt.errors import LmptError

TINY = [
    "tokenizer.vocab_size=1024",
    "data.seq_len=64",
    "trainer.batch_size=8",
    "trainer.max_steps=2",
    "trainer.sample_tokens=0",
    "trainer.progress=plain",
    "trainer.eval_batches=1",
    "model.n_layers=1",
    "objective=mlm",
]
WORDS = "the cat sat on a mat while dogs ran far away from home in rain and sun".split()


def _rows(n: int, start: int) -> list[dict]:
    """Sentences whose score is how many times 'cat' appears, plus a little: a lexical floor can learn it."""
    rng = np.random.default_rng(start)
    rows = []
    for i in range(n):
        words = list(rng.choice(WORDS, size=8))
        cats = i % 4
        words[:cats] = ["cat"] * cats
        rows.append({"text": " ".join(words), "label": round(cats + 0.1 * (i % 3), 2)})
    return rows


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A regression task folder: train, dev and test .jsonl with numeric labels."""
    for split, (n, start) in {"train": (40, 0), "dev": (16, 1), "test": (8, 2)}.items():
        lines = "".join(json.dumps(r) + "\n" for r in _rows(n, start))
        (tmp_path / f"{split}.jsonl").write_text(lines, encoding="utf-8")
    return tmp_path


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny mlm encoder, pre-trained once by the real CLI."""
    return pretrained(tmp_path_factory, TINY)


def test_the_registry_finds_regression_in_its_own_module() -> None:
    assert kinds()["regression"] is Regression and Regression.__module__ == "lmpt.downstream.kinds.regression"
    assert kind_of("regression:some/folder") is Regression
    assert type(read_result({"per_seed": [], PEARSON_MEAN: 0.5})) is RegressionResult  # asked before classification


def test_the_figures_are_scipys_and_numpys() -> None:
    rng = np.random.default_rng(0)
    gold, predicted = rng.normal(size=50), rng.normal(size=50)
    scores = regression_scores(gold, predicted, "test_")
    assert scores[f"test_{PEARSON}"] == pytest.approx(pearsonr(gold, predicted)[0])
    assert scores[f"test_{SPEARMAN}"] == pytest.approx(spearmanr(gold, predicted)[0])
    assert scores[f"test_{MSE}"] == pytest.approx(np.mean((gold - predicted) ** 2))
    constant = regression_scores(gold, np.full(50, 2.0))  # undefined correlation: 0, never NaN in a record
    assert constant[PEARSON] == 0.0 and constant[SPEARMAN] == 0.0


def test_the_floor_is_a_ridge_regression_on_tf_idf(folder: Path) -> None:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import Ridge

    labelled = read_labelled(TaskData(*(str(folder / f"{s}.jsonl") for s in ("train", "dev"))), "folder", True)
    floor = ridge_floor(labelled.examples)
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, token_pattern=r"(?u)\b\w+\b")
    train, dev = labelled.examples["train"], labelled.examples["dev"]
    model = Ridge(alpha=1.0).fit(vectorizer.fit_transform([e.text for e in train]), [float(e.label) for e in train])
    predicted = model.predict(vectorizer.transform([e.text for e in dev]))
    assert floor[PEARSON] == pytest.approx(pearsonr([float(e.label) for e in dev], predicted)[0])
    assert floor[PEARSON] > 0.5  # the count of 'cat' is lexical: a floor that learns nothing would sit at 0


def test_the_target_has_one_output_and_a_squared_error_loss() -> None:
    target = Regression.target()
    labels = target.labels([Example("a", None, "1.5"), Example("b", None, "-2")], [])
    assert target.outputs([]) == 1 and labels.tolist() == [1.5, -2.0]
    out = torch.tensor([[1.0], [0.0]])
    assert target.loss(out, labels).item() == pytest.approx(((1 - 1.5) ** 2 + (0 + 2) ** 2) / 2)
    assert target.outcomes(labels, target.predict(out)).tolist() == pytest.approx([-0.25, -4.0])


def test_a_label_that_is_not_a_number_is_refused_naming_file_and_line(folder: Path) -> None:
    dev = folder / "dev.jsonl"
    lines = dev.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[2] = json.dumps({"text": "a b", "label": "high"}) + "\n"
    dev.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(LmptError) as caught:
        read_labelled(TaskData(str(folder / "train.jsonl"), str(dev)), "folder", True)
    assert f'{dev}:3: label "high"' in str(caught.value) and "not a number" in str(caught.value)


@pytest.mark.parametrize("label", [1e300, "1e300", 10**400, -2e19])
def test_a_label_too_large_for_a_squared_error_is_refused_not_blamed_on_the_lr(folder: Path, label) -> None:
    dev = folder / "dev.jsonl"
    lines = dev.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[1] = json.dumps({"text": "a b", "label": label}) + "\n"
    dev.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(LmptError) as caught:
        read_labelled(TaskData(str(folder / "train.jsonl"), str(dev)), "folder", True)
    assert str(caught.value).startswith(f"{dev}:2: label") and "rescale the task's labels" in str(caught.value)


def test_lmpt_finetune_refuses_a_label_that_is_not_a_number_in_one_line(run, folder, capsys, monkeypatch) -> None:
    train = folder / "train.jsonl"
    train.write_text(train.read_text(encoding="utf-8") + json.dumps({"text": "x", "label": "nan"}) + "\n")
    argv = [str(run), "regression=true", f"data.train={train}", f"data.dev={folder / 'dev.jsonl'}", "lr=null"]
    err = refused(argv, capsys, monkeypatch)
    assert f"{train}:41" in err and "not a number" in err
    assert not (run / "downstream").exists()  # nothing written


def test_a_tiny_run_fine_tunes_a_one_output_head_beside_its_control(run, folder, capsys) -> None:
    argv = [
        str(run),
        "regression=true",
        *(f"data.{s}={folder / f'{s}.jsonl'}" for s in ("train", "dev", "test")),
        "seeds=2",
        "max_steps=3",
        "batch_size=16",
        "seq_len=32",
        "lr=null",
        "json=true",
    ]
    finetune_command(argv)
    result = json.loads(capsys.readouterr().out)
    assert {PEARSON_MEAN, "spearman_mean", "mse_mean", "test_pearson_mean", "mean_baseline_mse"} <= set(result)
    assert "accuracy_mean" not in result and len(result["per_seed"]) == 2
    gain = result["gain"][MSE]  # the drop in squared error over the control, paired over (seed, item)
    assert gain["gain"] == pytest.approx(result["scratch"]["mse_mean"] - result["mse_mean"])
    assert result["bag_of_words"]["method"].endswith("ridge regression)")
    record = read_record(Path(result["record"]))
    assert isinstance(record, RegressionResult)
    logged = RegressionResult.from_json(result).logged()
    assert set(logged) >= {PEARSON_MEAN, "mse_gain", "bow_pearson", "scratch_pearson_mean"}


def test_runs_with_only_a_regression_figure_rank_by_its_pearson(tmp_path: Path) -> None:
    from lmpt.downstream.records import write_record
    from lmpt.downstream.significance import welch_t
    from lmpt.report.ranking import choose_ranking
    from lmpt.report.runs import RunSummary
    from lmpt.report.significance import neighbour_significance

    runs = [
        RunSummary(
            tmp_path / n,
            n,
            [],
            "mlm",
            "completed",
            2,
            None,
            None,
            downstream={"downstream/STS-B/pearson_mean": v, "downstream/STS-B/mse_mean": 1.0},
        )
        for n, v in (("a", 0.2), ("b", 0.4))
    ]
    ranking = choose_ranking(runs)
    assert ranking.key == "downstream/STS-B/pearson_mean" and ranking.higher_is_better  # never the mse (lower wins)
    assert [ranking.value(r) for r in runs] == [0.2, 0.4]
    seeds = {"a": [0.1, 0.2, 0.3], "b": [0.38, 0.4, 0.42]}
    for name, values in seeds.items():  # each run's record: its Pearson per seed, as a regression writes it
        record = {
            "task": "STS-B",
            PEARSON_MEAN: sum(values) / 3,
            "per_seed": [{"seed": i, PEARSON: v} for i, v in enumerate(values)],
        }
        write_record(tmp_path / name / "downstream" / "STS-B.json", record)
    significance = neighbour_significance([runs[1], runs[0]], ranking)
    gap = welch_t(seeds["b"], seeds["a"])  # the gap of a regression figure: Welch's t over the seeds' Pearson
    assert significance is not None and significance.gaps[id(runs[1])].p == pytest.approx(gap)


def test_a_regressions_control_is_fine_tuned_once_and_shared(run, folder, capsys, monkeypatch) -> None:
    """As a classification's: the second fine-tuning with the same control reads it back (its per-item squared errors
    kept as numbers), the same figures and gain bit for bit; an entry whose outcomes were cut short is named in one
    line and fine-tuned again."""
    from lmpt.downstream import control_cache
    from lmpt.downstream import finetune as finetune_module
    from lmpt.downstream.control_cache import content_digest

    monkeypatch.setenv("LMPT_CACHE_DIR", str(folder / "cache"))
    argv = [str(run), "regression=true", *(f"data.{s}={folder / f'{s}.jsonl'}" for s in ("train", "dev", "test"))]
    argv += ["seeds=2", "max_steps=2", "batch_size=16", "seq_len=32", "lr=null", "json=true"]

    def fine_tuned() -> dict:
        finetune_command(argv)
        return json.loads(capsys.readouterr().out)

    first = fine_tuned()
    bodies: list = []
    real_tune = finetune_module.tune
    monkeypatch.setattr(finetune_module, "tune", lambda body, *a, **k: bodies.append(body) or real_tune(body, *a, **k))
    second = fine_tuned()
    assert len(bodies) == 1 and (first["scratch"]["shared"], second["scratch"]["shared"]) == (False, True)
    assert {**first["scratch"], "shared": True} == second["scratch"] and first["gain"] == second["gain"]
    entry = control_cache.controls_dir() / f"{first['scratch']['key']}.json"
    stored = json.loads(entry.read_text())
    assert all(isinstance(v, float) for row in stored["control"]["runs"]["correct"][""] for v in row)
    stored["control"]["runs"]["correct"][""] = [row[:-1] for row in stored["control"]["runs"]["correct"][""]]
    stored["digest"] = content_digest(stored["control"])
    entry.write_text(json.dumps(stored))
    finetune_command(argv)
    shown = capsys.readouterr()
    (line,) = shown.err.splitlines()
    assert "has per-item outcomes [15, 15] for dev, where 2 list(s) of 16 numbers were stored" in line
    assert json.loads(shown.out)["gain"] == first["gain"] and len(bodies) == 3
