"""GLUE's files at their edges (issue 53, items 8 and 13-17): each read refused in one line before any training, or
scored honestly, where it crashed or said nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from glue_files import write_glue

from lmpt.config.schema import DownstreamConfig
from lmpt.downstream.glue import TASKS, glue_tasks
from lmpt.downstream.glue_files import read_glue
from lmpt.downstream.run_tasks import check_downstream
from lmpt.downstream.significance import describe_gain, paired_gain
from lmpt.errors import LmptError
from lmpt.objectives.registry import objective_class


def _edit(path: Path, row: int, column: int, value: str) -> None:
    lines = path.read_text().splitlines()
    cells = lines[row].split("\t")
    cells[column] = value
    lines[row] = "\t".join(cells)
    path.write_text("\n".join(lines) + "\n")


def _checked(entry: str, max_train_examples: int | None = None) -> str:
    """lmpt's start-up check of a run scoring `entry`: the one-line refusal."""
    downstream = DownstreamConfig(
        choice_tasks=[],
        classification_tasks=[entry],
        mode="probe",
        seeds=1,
        epochs=1,
        batch_size=16,
        lr="fixed",
        control="scratch",
        max_train_examples=max_train_examples,
    )
    with pytest.raises(LmptError) as caught:
        check_downstream(downstream, objective_class("mlm"), 32, 64)
    return str(caught.value)


def test_a_hugging_face_split_labelled_minus_one_is_refused_not_read_as_the_last_class(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    names = datasets.ClassLabel(names=["entailment", "not_entailment"])
    features = datasets.Features(
        {
            "sentence1": datasets.Value("string"),
            "sentence2": datasets.Value("string"),
            "label": names,
            "idx": datasets.Value("int32"),
        }
    )

    def split(labels: list[int]):
        rows = {"sentence1": ["a b"] * len(labels), "sentence2": ["c d"] * len(labels), "label": labels}
        return datasets.Dataset.from_dict({**rows, "idx": list(range(len(labels)))}, features=features)

    saved = datasets.DatasetDict({"train": split([0, 1, 0, 1]), "validation": split([0, -1, 1])})
    saved.save_to_disk(str(tmp_path / "rte"))
    with pytest.raises(LmptError, match=r"validation row 1: label -1 is not one of RTE's 2 classes .*-1 marks an"):
        read_glue(str(tmp_path), TASKS["rte"])


@pytest.mark.parametrize("score", ["5.5", "-0.2", "100"])
def test_an_sts_b_score_outside_0_to_5_is_refused_naming_its_line(tmp_path: Path, score: str) -> None:
    root = write_glue(tmp_path / "glue", ("STS-B",))
    _edit(root / "STS-B" / "train.tsv", 3, -1, score)
    with pytest.raises(LmptError, match=rf"train.tsv:4: score {score} is outside STS-B's 0 to 5"):
        read_glue(str(root), TASKS["stsb"])


def test_a_nan_sts_b_score_is_advised_as_a_glue_file_not_with_a_key_glue_ignores(tmp_path: Path) -> None:
    root = write_glue(tmp_path / "glue", ("STS-B",))
    _edit(root / "STS-B" / "dev.tsv", 2, -1, "NaN")
    with pytest.raises(LmptError) as caught:
        read_glue(str(root), TASKS["stsb"])
    assert "dev.tsv:3: label" in str(caught.value) and "download it again" in str(caught.value)
    assert "data.label_field" not in str(caught.value)


@pytest.mark.parametrize("rows", [1, 3])
def test_an_sts_b_dev_set_of_one_score_is_refused_as_no_correlation(tmp_path: Path, rows: int) -> None:
    """One row (scipy's ValueError after fine-tuning) or a constant set (a silent 0.0 correlation) is refused."""
    root = write_glue(tmp_path / "glue", ("STS-B",))
    dev = root / "STS-B" / "dev.tsv"
    lines = dev.read_text().splitlines()
    dev.write_text("\n".join([lines[0], *([lines[1]] * rows)]) + "\n")
    message = _checked(f"glue:sts-b@{root}")
    assert message.startswith("downstream.classification_tasks[0]") and "(STS-B, dev) gives its" in message
    assert f"{rows} example(s) one score: a correlation with them is undefined" in message


def test_a_training_split_of_one_class_is_refused_before_the_floor_meets_it(tmp_path: Path) -> None:
    root = write_glue(tmp_path / "glue", ("RTE",))
    train = root / "RTE" / "train.tsv"
    lines = train.read_text().splitlines()
    train.write_text("\n".join([lines[0], *(line for line in lines[1:] if line.endswith("\tentailment"))]) + "\n")
    assert "has only one class ('entailment')" in _checked(f"glue:rte@{root}")


def test_a_small_max_train_examples_that_draws_one_class_says_so(tmp_path: Path) -> None:
    root = write_glue(tmp_path / "glue", ("RTE",))
    train = root / "RTE" / "train.tsv"
    lines = train.read_text().splitlines()
    ones = [line for line in lines[1:] if line.endswith("\tentailment")]
    train.write_text("\n".join([lines[0], *ones, *[line for line in lines[1:] if line not in ones][:1]]) + "\n")
    message = _checked(f"glue:rte@{root}", max_train_examples=1)
    assert "max_train_examples=1 of data.dir=" in message and "raise max_train_examples" in message


def test_a_field_longer_than_csvs_limit_is_one_line(tmp_path: Path) -> None:
    root = write_glue(tmp_path / "glue", ("RTE",))
    _edit(root / "RTE" / "dev.tsv", 2, 1, "word " * 30_000)
    with pytest.raises(LmptError, match=r"dev.tsv:3 cannot be read as one example \(field larger than field limit"):
        read_glue(str(root), TASKS["rte"])


@pytest.mark.parametrize(
    ("names", "said"),
    [("glue:,", r"names no task: give task=glue \(all nine\)"), ("glue:rte,RTE", "names RTE twice")],
)
def test_a_glue_list_of_no_task_or_one_task_twice_is_refused(names: str, said: str) -> None:
    with pytest.raises(LmptError, match=said):
        glue_tasks(names)
    assert [t.name for t in glue_tasks("glue:sts-b,rte")] == ["STS-B", "RTE"] and len(glue_tasks("glue")) == 9


def test_a_gain_on_fewer_items_than_any_test_can_decide_is_never_significant() -> None:
    one = paired_gain(np.ones((3, 1)), np.zeros((3, 1)))  # one dev item, right under every seed
    assert one["interval"] == [1.0, 1.0] and not one["significant"]
    assert "1 item(s) are too few to tell any gain from 0" in describe_gain("x", one)
    six = paired_gain(np.ones((3, 6)), np.zeros((3, 6)))  # the sign test's p on 6 items: 2 / 64 < 0.05
    assert six["significant"] and paired_gain(np.ones((3, 5)), np.zeros((3, 5)))["significant"] is False
