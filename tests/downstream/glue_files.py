"""A fake GLUE folder in the shape GLUE's download script writes (DIR/TASK/{train,dev,test}.tsv with each task's own
columns: CoLA's labelled files headerless, MNLI's two dev and two test files, the diagnostic set), a few dozen rows a
task, for the GLUE tests."""

from __future__ import annotations

import random
from pathlib import Path

WORDS = (
    "the cat sat on a mat while dogs ran far away from home in rain and sun a man saw two birds near old river bank"
).split()


def _sentence(rng: random.Random, good: bool) -> str:
    words = rng.sample(WORDS, 7)
    return " ".join((["good", "fine"] if good else ["bad", "poor"]) + words)


def _write(path: Path, rows: list[list[str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")


HEADERS = {
    "SST-2": ["sentence", "label"],
    "MRPC": ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"],
    "QQP": ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
    "STS-B": [
        "index",
        "genre",
        "filename",
        "year",
        "old_index",
        "source1",
        "source2",
        "sentence1",
        "sentence2",
        "score",
    ],
    "MNLI": [
        "index",
        "promptID",
        "pairID",
        "genre",
        "sentence1_binary_parse",
        "sentence2_binary_parse",
        "sentence1_parse",
        "sentence2_parse",
        "sentence1",
        "sentence2",
        "label1",
        "gold_label",
    ],
    "QNLI": ["index", "question", "sentence", "label"],
    "RTE": ["index", "sentence1", "sentence2", "label"],
    "WNLI": ["index", "sentence1", "sentence2", "label"],
}
LABELS = {
    "CoLA": ["0", "1"],
    "SST-2": ["0", "1"],
    "MRPC": ["0", "1"],
    "QQP": ["0", "1"],
    "MNLI": ["entailment", "neutral", "contradiction"],
    "QNLI": ["entailment", "not_entailment"],
    "RTE": ["entailment", "not_entailment"],
    "WNLI": ["0", "1"],
}


def _labelled_row(task: str, i: int, rng: random.Random) -> list[str]:
    if task == "STS-B":
        score = f"{(i % 6) * 0.95:.3f}"
        a = _sentence(rng, i % 6 > 2)
        return [
            str(i),
            "main-news",
            "f",
            "2012",
            str(i),
            "none",
            "none",
            a,
            a if i % 2 else _sentence(rng, False),
            score,
        ]
    label = LABELS[task][i % len(LABELS[task])]
    a, b = _sentence(rng, i % 2 == 0), _sentence(rng, i % 3 == 0)
    if task == "CoLA":
        return ["gj04", label, "" if label == "1" else "*", a]
    if task == "SST-2":
        return [a, label]
    if task == "MRPC":
        return [label, str(100 + i), str(200 + i), a, b]
    if task == "QQP":
        return [str(i), str(2 * i), str(2 * i + 1), a, b, label]
    if task == "MNLI":
        return [str(i), "1", f"{i}e", "fiction", "(x)", "(y)", "(X)", "(Y)", a, b, label, label]
    return [str(i), a, b, label]


def _test_rows(task: str, n: int, rng: random.Random) -> list[list[str]]:
    pair = lambda: [_sentence(rng, True), _sentence(rng, False)]
    if task in ("CoLA", "SST-2"):
        return [["index", "sentence"], *([str(i), _sentence(rng, i % 2 == 0)] for i in range(n))]
    if task == "MRPC":
        return [["index", "#1 ID", "#2 ID", "#1 String", "#2 String"], *([str(i), "1", "2", *pair()] for i in range(n))]
    if task == "QQP":
        return [["id", "question1", "question2"], *([str(i), *pair()] for i in range(n))]
    if task == "QNLI":
        return [["index", "question", "sentence"], *([str(i), *pair()] for i in range(n))]
    if task in ("STS-B", "MNLI"):
        header = HEADERS[task][:-1] if task == "STS-B" else HEADERS[task][:10]
        return [header, *([str(i), *["x"] * (len(header) - 3), *pair()] for i in range(n))]
    return [["index", "sentence1", "sentence2"], *([str(i), *pair()] for i in range(n))]


def write_glue(
    root: Path, tasks: tuple[str, ...] = tuple(LABELS) + ("STS-B",), train: int = 40, dev: int = 12, test: int = 6
) -> Path:
    """DIR/TASK/*.tsv for `tasks` (GLUE's folder names), and the diagnostic set; returns DIR."""
    rng = random.Random(0)
    for task in tasks:
        folder = root / task
        header = [] if task == "CoLA" else [HEADERS[task]]
        _write(folder / "train.tsv", header + [_labelled_row(task, i, rng) for i in range(train)])
        devs, tests = (
            (("dev_matched", "dev_mismatched"), ("test_matched", "test_mismatched"))
            if task == "MNLI"
            else (("dev",), ("test",))
        )
        for name in devs:
            _write(folder / f"{name}.tsv", header + [_labelled_row(task, i, rng) for i in range(dev)])
        for name in tests:
            _write(folder / f"{name}.tsv", _test_rows(task, test, rng))
    _write(root / "diagnostic" / "diagnostic.tsv", _test_rows("AX", 5, rng))
    return root
