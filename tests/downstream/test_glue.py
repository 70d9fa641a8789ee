"""GLUE as it ships: the nine tasks read from the folder GLUE's download script writes (a fake one, a few dozen rows a
task, written per test) or from Hugging Face save_to_disk folders; names in any case; the official metrics checked
against scikit-learn and scipy; the GLUE score's arithmetic; `lmpt-finetune RUN task=glue:...` on a tiny run writing
its record, its dev predictions (the figures recomputed from them) and the GLUE server's test files; and each bad
input refused in one line, exit 2, before any training, with nothing written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from finetune_commands import pretrained, refused
from glue_files import write_glue
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

from lmpt.config.schema import DownstreamConfig
from lmpt.downstream.figures import METRICS, SCRATCH
from lmpt.downstream.finetune_cli import finetune_command
from lmpt.downstream.glue import TASKS, glue_score, glue_task, glue_tasks, task_metrics
from lmpt.downstream.glue_files import read_glue
from lmpt.downstream.kinds.classification import Classification, ClassificationResult
from lmpt.downstream.kinds.regression import Regression, RegressionResult
from lmpt.downstream.labelled_files import TaskData
from lmpt.downstream.official import task_score
from lmpt.downstream.records import task_record
from lmpt.downstream.run_tasks import check_downstream, score_downstream
from lmpt.downstream.task import kind_of, read_task
from lmpt.errors import LmptError
from lmpt.objectives.registry import objective_class

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
FAST = ["seeds=2", "max_steps=2", "batch_size=16", "seq_len=32", "lr=null", "epochs=1"]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny mlm encoder, pre-trained once by the real CLI."""
    return pretrained(tmp_path_factory, TINY)


def test_every_task_is_read_with_its_own_columns(tmp_path: Path) -> None:
    root = write_glue(tmp_path)
    assert [t.name for t in glue_tasks("glue")] == [
        "CoLA",
        "SST-2",
        "MRPC",
        "QQP",
        "STS-B",
        "MNLI",
        "QNLI",
        "RTE",
        "WNLI",
    ]
    cola = read_glue(str(root), TASKS["cola"])  # headerless: the sentence is column 3, the label column 1
    assert len(cola.labelled["train"]) == 40 and cola.labelled["train"][0].text.startswith("good")
    mnli = read_glue(str(root), TASKS["mnli"])
    assert set(mnli.labelled) == {"train", "dev_matched", "dev_mismatched"}
    assert list(mnli.tests) == ["test_matched", "test_mismatched", "ax"]  # the diagnostic set, predicted by MNLI
    stsb = read_glue(str(root), TASKS["stsb"])
    assert stsb.labelled["dev"][1].label == "0.950" and stsb.labelled["dev"][1].pair is not None
    assert read_glue(str(root), TASKS["mrpc"]).tests["test"][0] == [str(i) for i in range(6)]


@pytest.mark.parametrize("name", ["sts-b", "stsb", "STS-B", "StsB"])
def test_names_are_glues_folders_or_hf_configs_in_any_case(name: str) -> None:
    assert glue_task(name) is TASKS["stsb"]
    assert [t.name for t in glue_tasks(f"glue:rte,{name},MRPC")] == ["MRPC", "STS-B", "RTE"]


def test_the_official_metrics_are_sklearns_and_scipys() -> None:
    gold, predicted = ["1", "0", "1", "1", "0", "1"], ["1", "1", "1", "0", "0", "1"]
    assert task_metrics(TASKS["cola"], {"dev": gold}, {"dev": predicted}) == pytest.approx(
        {"mcc": matthews_corrcoef(gold, predicted)}
    )
    mrpc = task_metrics(TASKS["mrpc"], {"dev": gold}, {"dev": predicted})
    assert mrpc == pytest.approx(
        {"f1": f1_score(gold, predicted, pos_label="1"), "accuracy": accuracy_score(gold, predicted)}
    )
    scores, guess = ["0.5", "3.2", "4.8", "1.0"], [1.0, 2.5, 4.0, 2.0]
    stsb = task_metrics(TASKS["stsb"], {"dev": scores}, {"dev": guess})
    numbers = [float(s) for s in scores]
    assert stsb == pytest.approx({"pearson": pearsonr(numbers, guess)[0], "spearman": spearmanr(numbers, guess)[0]})
    mnli = task_metrics(
        TASKS["mnli"],
        {"dev_matched": ["entailment", "neutral"], "dev_mismatched": ["neutral"]},
        {"dev_matched": ["entailment", "entailment"], "dev_mismatched": ["neutral"]},
    )
    assert mnli == {"matched_accuracy": 0.5, "mismatched_accuracy": 1.0}


def test_the_glue_score_is_the_mean_of_task_scores_two_metric_tasks_their_mean() -> None:
    assert task_score({"f1": 0.8, "accuracy": 0.6}) == pytest.approx(0.7)
    scores = {"mrpc": 0.7, "rte": 0.5, "wnli": 0.1}
    assert glue_score(scores) == pytest.approx(0.6)  # WNLI left out, as BERT's table did
    assert glue_score(scores, with_wnli=True) == pytest.approx(1.3 / 3)


def test_a_hugging_face_save_to_disk_folder_reads_as_the_download_does(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    tsv = read_glue(str(write_glue(tmp_path / "tsv", ("RTE",))), TASKS["rte"])
    names = datasets.ClassLabel(names=["entailment", "not_entailment"])

    def split(examples, labelled: bool):
        rows = {
            "sentence1": [e.text for e in examples],
            "sentence2": [e.pair for e in examples],
            "label": [names.str2int(e.label) if labelled else -1 for e in examples],
            "idx": list(range(len(examples))),
        }
        features = datasets.Features(
            {
                "sentence1": datasets.Value("string"),
                "sentence2": datasets.Value("string"),
                "label": names,
                "idx": datasets.Value("int32"),
            }
        )
        return datasets.Dataset.from_dict(rows, features=features)

    saved = datasets.DatasetDict(
        {
            "train": split(tsv.labelled["train"], True),
            "validation": split(tsv.labelled["dev"], True),
            "test": split(tsv.tests["test"][1], False),
        }
    )
    saved.save_to_disk(str(tmp_path / "hf" / "rte"))
    hf = read_glue(str(tmp_path / "hf"), glue_task("RTE"))
    assert hf.labelled == tsv.labelled and hf.tests["test"][1] == [e for e in tsv.tests["test"][1]]


def test_glue_on_a_tiny_run_writes_its_record_predictions_and_server_files(run, tmp_path, capsys) -> None:
    root = write_glue(tmp_path / "glue", ("STS-B", "MNLI", "MRPC"))
    finetune_command(
        [str(run), "task=glue:sts-b,mnli,mrpc", f"data.dir={root}", *FAST, "max_train_examples=30", "json=true"]
    )
    record = json.loads(capsys.readouterr().out)
    assert record["tasks"] == ["MRPC", "STS-B", "MNLI"] and record["max_train_examples"] == 30
    assert all(r["train_examples"] == 30 for r in record["results"].values())
    assert (record["kind"], record["record_version"]) == ("glue-suite", 1)  # the suite's record names its kind
    assert {hf: r["kind"] for hf, r in record["results"].items()} == {  # and each task's record its own
        "mnli": "classification",
        "mrpc": "classification",
        "stsb": "regression",
    }
    assert set(record["models"]) == {"pretrained", "scratch", "bag_of_words"}
    assert set(record["models"]["pretrained"]["mnli"]["figures"]) == {"matched_accuracy", "mismatched_accuracy"}
    assert set(record["models"]["bag_of_words"]["stsb"]["figures"]) == {"pearson", "spearman"}
    tasks = record["models"]["pretrained"]
    assert record["scores"]["pretrained"] == pytest.approx(sum(t["score"] for t in tasks.values()) / 3)
    # the dev predictions kept beside the record give back every figure
    dev = json.loads((Path(record["dev_predictions"]) / "MRPC.json").read_text())
    seeds = [task_metrics(TASKS["mrpc"], dev["gold"], seed) for seed in dev["pretrained"]]
    assert len(seeds) == 2 and tasks["mrpc"]["figures"]["f1"] == pytest.approx((seeds[0]["f1"] + seeds[1]["f1"]) / 2)
    assert seeds[0]["accuracy"] == pytest.approx(record["results"]["mrpc"]["per_seed"][0]["accuracy"])
    # the test split's predictions, as the GLUE server takes them
    test = Path(record["test_predictions"])
    assert sorted(p.name for p in test.iterdir()) == ["AX.tsv", "MNLI-m.tsv", "MNLI-mm.tsv", "MRPC.tsv", "STS-B.tsv"]
    mnli = set(TASKS["mnli"].labels)  # GLUE's strings, as the server takes them
    for name, labels in (("MNLI-mm.tsv", mnli), ("AX.tsv", mnli), ("MRPC.tsv", {"0", "1"})):
        lines = (test / name).read_text().splitlines()
        assert lines[0] == "index\tprediction" and all(line.split("\t")[1] in labels for line in lines[1:])
    scores = [line.split("\t") for line in (test / "STS-B.tsv").read_text().splitlines()[1:]]
    assert [i for i, _ in scores] == [str(i) for i in range(6)] and all(float(v) == float(v) for _, v in scores)


def test_the_table_says_whether_wnli_counts_and_the_cap(run, tmp_path, capsys) -> None:
    root = write_glue(tmp_path / "glue", ("WNLI", "RTE"))
    finetune_command(
        [str(run), "task=glue:wnli,rte", f"data.dir={root}", *FAST, "control=none", "seeds=1", "max_train_examples=25"]
    )
    out = capsys.readouterr().out
    assert "WNLI not counted (as BERT)" in out and "at most 25 training examples a task" in out and "GLUE score" in out


def _refused_writes_nothing(run: Path, argv: list[str], capsys, monkeypatch) -> str:
    before = sorted(p.name for p in (run / "downstream" / "hand").glob("*")) if (run / "downstream").exists() else []
    err = refused([str(run), *argv, *FAST], capsys, monkeypatch)
    after = sorted(p.name for p in (run / "downstream" / "hand").glob("*")) if (run / "downstream").exists() else []
    assert before == after
    return err


def test_an_unknown_task_name_is_one_line(run, tmp_path, capsys, monkeypatch) -> None:
    root = write_glue(tmp_path / "glue", ("RTE",))
    err = _refused_writes_nothing(run, ["task=glue:rte,sst3", f"data.dir={root}"], capsys, monkeypatch)
    assert "GLUE has no task 'sst3'" in err and "STS-B" in err


def test_a_missing_file_is_one_line(run, tmp_path, capsys, monkeypatch) -> None:
    root = write_glue(tmp_path / "glue", ("RTE", "MNLI"))
    (root / "MNLI" / "dev_mismatched.tsv").unlink()
    err = _refused_writes_nothing(run, ["task=glue:rte,mnli", f"data.dir={root}"], capsys, monkeypatch)
    assert "dev_mismatched.tsv is missing" in err


def test_a_file_whose_columns_are_not_the_tasks_is_one_line(run, tmp_path, capsys, monkeypatch) -> None:
    root = write_glue(tmp_path / "glue", ("RTE", "QNLI"))
    (root / "RTE" / "train.tsv").write_bytes((root / "QNLI" / "train.tsv").read_bytes())  # QNLI's columns
    err = _refused_writes_nothing(run, ["task=glue:rte", f"data.dir={root}"], capsys, monkeypatch)
    assert "RTE/train.tsv: its columns (index, question, sentence, label) are not RTE's" in err
    with pytest.raises(LmptError, match="not one of CoLA's"):  # CoLA is headerless: its label column is checked
        root2 = write_glue(tmp_path / "glue2", ("CoLA",))
        (root2 / "CoLA" / "dev.tsv").write_text("gj04\tyes\t\tA sentence.\n")
        read_glue(str(root2), TASKS["cola"])


def test_a_regression_label_that_is_not_a_number_is_one_line(run, tmp_path, capsys, monkeypatch) -> None:
    root = write_glue(tmp_path / "glue", ("STS-B",))
    path = root / "STS-B" / "dev.tsv"
    lines = path.read_text().splitlines()
    lines[3] = "\t".join(lines[3].split("\t")[:-1] + ["high"])
    path.write_text("\n".join(lines) + "\n")
    err = _refused_writes_nothing(run, ["task=glue:stsb", f"data.dir={root}"], capsys, monkeypatch)
    assert f"{path}:4: label" in err and "not a number" in err


def test_glue_beside_data_train_is_one_line(run, tmp_path, capsys, monkeypatch) -> None:
    root = write_glue(tmp_path / "glue", ("RTE",))
    argv = ["task=glue", f"data.dir={root}", f"data.train={root / 'RTE' / 'train.tsv'}"]
    err = _refused_writes_nothing(run, argv, capsys, monkeypatch)
    assert "task=glue reads each task's files from data.dir: drop data.train" in err


def test_glue_entries_are_found_by_their_kind(tmp_path: Path) -> None:
    root = write_glue(tmp_path / "glue", ("RTE", "STS-B"))
    assert kind_of(f"glue:rte@{root}") is Classification and kind_of(f"glue:sts-b@{root}") is Regression
    assert kind_of(f"glue:StsB@{root}", zero_shot=False) is Regression
    assert Classification.named(f"glue:sts-b@{root}", "k") == "STS-B"  # what a study names the task by
    items = read_task(f"glue:sts-b@{root}", "quality.decontaminate_tasks[0]").texts()
    assert items.name == "STS-B" and len(items.texts) == 12


@pytest.mark.parametrize(
    ("entry", "said"),
    [("glue:sst3@{root}", "GLUE has no task 'sst3'"), ("glue:rte", "names no GLUE folder: write glue:NAME@DIR")],
)
def test_a_bad_glue_entry_is_refused_before_training_naming_its_key(entry: str, said: str, tmp_path: Path) -> None:
    root = write_glue(tmp_path / "glue", ("RTE",))
    downstream = DownstreamConfig(
        choice_tasks=[],
        classification_tasks=[entry.format(root=root)],
        mode="probe",
        seeds=1,
        epochs=1,
        batch_size=16,
        lr="fixed",
        control="none",
    )
    with pytest.raises(LmptError) as caught:
        check_downstream(downstream, objective_class("mlm"), 32, 64)
    assert str(caught.value).startswith("downstream.classification_tasks[0]") and said in str(caught.value)


def test_glue_entries_are_scored_when_a_run_ends(run, tmp_path) -> None:
    root = write_glue(tmp_path / "glue", ("RTE", "STS-B"))
    downstream = DownstreamConfig(
        choice_tasks=[],
        classification_tasks=[f"glue:rte@{root}", f"glue:sts-b@{root}"],
        mode="probe",
        seeds=2,
        epochs=1,
        batch_size=16,
        lr="fixed",
        control="scratch",
        weights="last",
        max_train_examples=30,
    )
    check_downstream(downstream, objective_class("mlm"), 32, 64)
    figures = score_downstream(downstream, run, 2)
    assert {
        "downstream/RTE/accuracy_mean",
        "downstream/STS-B/pearson_mean",
        "downstream/STS-B/mse_gain",
        "downstream/STS-B/bow_pearson",
    } <= set(figures)
    record = task_record(run, "STS-B")
    assert isinstance(record, RegressionResult) and record.figure("train_examples") == 30
    assert record.seed_figures("pearson") is not None and len(record.seed_figures("pearson")) == 2


def test_a_save_to_disk_folder_without_datasets_says_which_extra_to_install(tmp_path: Path, monkeypatch) -> None:
    root = write_glue(tmp_path / "glue", ("RTE",))
    (root / "rte").mkdir()
    (root / "rte" / "dataset_dict.json").write_text('{"splits": ["train"]}')
    monkeypatch.setitem(__import__("sys").modules, "datasets", None)  # as a bare install: no datasets
    with pytest.raises(LmptError) as caught:
        read_glue(str(root), TASKS["rte"])
    assert "pip install 'lmpt[hf]'" in str(caught.value) and "\n" not in str(caught.value)


def test_a_glue_task_scores_the_same_by_lmpt_finetune_and_in_a_run(run, tmp_path, capsys, monkeypatch) -> None:
    """Issue 64: `lmpt-finetune RUN task=glue:rte data.dir=DIR` and a run's downstream.tasks=[glue:rte@DIR] take one
    route (the task's `score`) and write one record: the same figures, seed by seed, and the same control (the run's
    reads back the one the suite fine-tuned)."""
    monkeypatch.setenv("LMPT_CACHE_DIR", str(tmp_path / "cache"))
    root = write_glue(tmp_path / "glue", ("RTE",))
    recipe = ["mode=probe", "seeds=2", "epochs=1", "batch_size=16", "lr=null", "max_train_examples=30"]
    finetune_command([str(run), "task=glue:rte", f"data.dir={root}", *recipe, "json=true"])
    suite = json.loads(capsys.readouterr().out)["results"]["rte"]
    downstream = DownstreamConfig(
        tasks=[f"glue:rte@{root}"],
        mode="probe",
        seeds=2,
        epochs=1,
        batch_size=16,
        lr="fixed",
        control="scratch",
        max_train_examples=30,
    )
    copy = tmp_path / "run"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("downstream"))
    score_downstream(downstream, copy, 2)
    record = task_record(copy, "RTE")
    assert isinstance(record, ClassificationResult) and list(record.raw) == list(suite)  # one record shape
    assert record.raw["weights"] == "last" and suite["weights"] != "last"  # the weights each scored
    assert (suite["scratch"]["shared"], record.raw["scratch"]["shared"]) == (False, True)  # the suite's control
    volatile = {"weights", "examples_per_s"}
    same = lambda r: {k: v for k, v in r.items() if k not in volatile} | {SCRATCH: _control(r)}
    assert same(record.raw) == same(suite)
    assert suite["glue_metrics"] == ["accuracy"] and all("glue_score" in s for s in suite["per_seed"])


def _control(record: dict) -> dict:
    return {k: v for k, v in record[SCRATCH].items() if k not in ("shared", "entry_digest")}


def test_a_task_carries_its_metrics_each_knowing_which_way_is_better(tmp_path: Path) -> None:
    """GLUE is a table: each task lists its official metrics (as lm-evaluation-harness's tasks/glue/*/default.yaml),
    each one of lmpt's metrics, which knows which way is better; a task read from GLUE carries them and its test
    files, a task of data.* files none (its kind's figures alone)."""
    assert METRICS["mse"].higher_is_better is False and METRICS["mcc"].higher_is_better
    assert all(m.higher_is_better for t in TASKS.values() for m in t.metrics)  # a task's score is their mean
    assert [(m.name, m.metric or m.name, m.split) for m in TASKS["mnli"].metrics] == [
        ("matched_accuracy", "accuracy", "dev"),
        ("mismatched_accuracy", "accuracy", "test"),
    ]
    root = write_glue(tmp_path / "glue", ("MNLI",))
    mnli = read_task(f"glue:mnli@{root}", "downstream.tasks[0]")
    assert isinstance(mnli, Classification) and mnli.options.data == TaskData()  # data.dir means nothing to it
    labelled = mnli.examples()
    assert labelled.metrics == TASKS["mnli"].metrics and set(labelled.examples) == {"train", "dev", "test"}
    assert [u.name for u in labelled.unlabelled] == ["test_matched", "test_mismatched", "ax"]
    assert read_task("bundled:clinc-domains").examples().metrics == ()  # type: ignore[attr-defined]
