"""`lmpt-preview` run as a user would: its JSON is consistent with each objective, options are typed keys,
and it writes nothing in the working directory."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from runner import run_lmpt

from lmpt.data.cache import PreparedData

SMALL = ["tokenizer.vocab_size=1024", "data.seq_len=64"]
IGNORE = -100
OBJECTIVES = ["clm", "mlm", "nsp", "span", "prefix", "ul2-mixture", "mdlm"]


def run_preview(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_lmpt(*SMALL, *args, cwd=cwd, command="lmpt-preview")  # LMPT_CACHE_DIR: conftest's session fixture


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory, shakespeare: PreparedData) -> Path:
    """An empty working directory (the tokenizer and token cache already built)."""
    return tmp_path_factory.mktemp("preview-cwd")


_documents: dict[tuple[str, ...], dict] = {}


def preview_json(*args: str, cwd: Path) -> dict:
    """The JSON document of `lmpt-preview ARGS preview.json=true` (each command line runs once per module)."""
    if args not in _documents:
        done = run_preview(*args, "preview.json=true", cwd=cwd)
        assert done.returncode == 0, done.stderr
        assert list(cwd.iterdir()) == []  # no outputs/, no .hydra/
        _documents[args] = json.loads(done.stdout)  # the whole of stdout is one document
    return _documents[args]


def sentinel_ids(document: dict) -> dict[str, int]:
    """Piece -> id of every sentinel that occurs in the inputs."""
    return {
        piece: token
        for example in document["examples"]
        for piece, token in zip(example["input_pieces"], example["input_ids"], strict=True)
        if piece.startswith("<extra_id_")
    }


def fill_spans(inputs: list[int], targets: list[int], sentinels: set[int]) -> list[int]:
    """Undo span corruption: each sentinel in `inputs` replaced by its span from `targets` (eos dropped)."""
    spans: dict[int, list[int]] = {}
    current = None
    for token in targets[:-1]:
        if token in sentinels:
            current = spans.setdefault(token, [])
        else:
            assert current is not None
            current.append(token)
    restored = []
    for token in inputs[:-1]:
        restored.extend(spans[token] if token in sentinels else [token])
    return restored


def check_common(document: dict, objective: str, n_examples: int) -> None:
    assert document["objective"] == objective and document["attention"]
    assert len(document["examples"]) == n_examples
    for example in document["examples"]:
        assert len(example["input_pieces"]) == len(example["input_ids"]) <= 64
        loss = [p for p, label in enumerate(example["labels"]) if label != IGNORE]
        assert example["loss_positions"] == loss
        assert loss or objective == "nsp"  # a short nsp pair may have no token selected
        assert example["target_ids"] == [example["labels"][p] for p in loss]
        assert example["original_text"]
        if example["decoder_input_ids"] is not None:
            assert len(example["decoder_input_ids"]) == len(example["labels"])
            assert example["decoder_input_ids"][1:] == example["labels"][:-1]
        else:
            assert len(example["labels"]) == len(example["input_ids"])


def check_clm(document: dict) -> None:
    for example in document["examples"]:
        original = example["original_ids"]
        assert example["input_ids"] == original[:-1] and example["labels"] == original[1:]
        assert example["corrupted_positions"] == [] and example["prefix_len"] is None


def check_mlm(document: dict) -> None:
    for example in document["examples"]:
        original, inputs = example["original_ids"], example["input_ids"]
        assert len(original) == len(inputs) == 64
        assert example["corrupted_positions"] == example["loss_positions"]
        changed = [p for p, (a, b) in enumerate(zip(original, inputs, strict=True)) if a != b]
        assert set(changed) <= set(example["corrupted_positions"])
        for p, kind in zip(example["corrupted_positions"], example["corruption"], strict=True):
            assert example["labels"][p] == original[p]
            assert (example["input_pieces"][p] == "[MASK]") == (kind == "mask")


def check_mdlm(document: dict) -> None:
    shares = set()
    for example in document["examples"]:
        original, inputs = example["original_ids"], example["input_ids"]
        assert len(inputs) == 64 and example["corrupted_positions"] == example["loss_positions"]
        for p in example["corrupted_positions"]:
            assert example["input_pieces"][p] == "[MASK]" and example["labels"][p] == original[p]
        shares.add(len(example["loss_positions"]))
    assert len(shares) > 2  # each row masks at its own time t


def check_nsp(document: dict) -> None:
    for example in document["examples"]:
        pieces, segments = example["input_pieces"], example["segment_ids"]
        assert pieces[0] == "[CLS]" and pieces[-1] == "[SEP]" and pieces.count("[SEP]") == 2
        first_sep = pieces.index("[SEP]")
        assert segments == [0] * (first_sep + 1) + [1] * (len(pieces) - first_sep - 1)
        assert example["sequence_label"] in (0, 1)
        assert example["corrupted_positions"] == example["loss_positions"]


def check_span(document: dict) -> None:
    sentinels = sentinel_ids(document)
    for example in document["examples"]:
        in_order = [p for p in example["input_pieces"] if p.startswith("<extra_id_")]
        assert in_order == [f"<extra_id_{k}>" for k in range(len(in_order))] and in_order
        assert example["target_ids"][0] == sentinels["<extra_id_0>"]
        assert example["corrupted_positions"] == [
            p for p, piece in enumerate(example["input_pieces"]) if piece.startswith("<extra_id_")
        ]
        restored = fill_spans(example["input_ids"], example["target_ids"], set(sentinels.values()))
        assert restored == example["original_ids"]


def check_prefix(document: dict) -> None:
    for example in document["examples"]:
        k, n = example["prefix_len"], len(example["input_ids"])
        assert 1 <= k < n
        assert example["loss_positions"] == list(range(k - 1, n))  # the last prefix position predicts the suffix
        assert example["input_ids"][:k] + example["target_ids"] == example["original_ids"]
        assert example["input_ids"] == example["original_ids"][:-1]


def check_ul2(document: dict) -> None:
    sentinels = set(sentinel_ids(document).values())
    modes = {"R": "[NLU]", "X": "[NLG]", "S": "[S2S]"}
    for example in document["examples"]:
        kind = example["denoiser"][0]
        assert example["input_pieces"][0] == modes[kind]
        inputs, targets = example["input_ids"][1:], example["target_ids"]
        if kind == "S":
            assert inputs + targets[:-1] == example["original_ids"] and not example["corrupted_positions"]
        else:
            assert fill_spans(inputs, targets, sentinels) == example["original_ids"]


CHECKS = {
    "clm": check_clm,
    "mlm": check_mlm,
    "nsp": check_nsp,
    "span": check_span,
    "prefix": check_prefix,
    "ul2-mixture": check_ul2,
    "mdlm": check_mdlm,
}


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_json_shows_what_each_objective_does(objective: str, workdir: Path) -> None:
    document = preview_json(f"objective={objective}", "preview.examples=8", cwd=workdir)
    check_common(document, objective, 8)
    CHECKS[objective](document)


def test_higher_mask_prob_selects_more_tokens(workdir: Path) -> None:
    def selected_fraction(*mask_prob: str) -> float:
        examples = preview_json("objective=mlm", "preview.examples=8", *mask_prob, cwd=workdir)["examples"]
        return sum(len(e["loss_positions"]) for e in examples) / sum(len(e["input_ids"]) for e in examples)

    low, high = selected_fraction(), selected_fraction("objective.mask_prob=0.4")  # default 0.15
    assert 0.08 < low < 0.22 and 0.3 < high < 0.5


def test_every_objective_is_shown_the_same_text(workdir: Path) -> None:
    clm = preview_json("objective=clm", "preview.examples=8", cwd=workdir)["examples"]
    mlm = preview_json("objective=mlm", "preview.examples=8", cwd=workdir)["examples"]
    assert [e["offset"] for e in clm] == [e["offset"] for e in mlm]
    assert all(c["original_ids"][:64] == m["original_ids"] for c, m in zip(clm, mlm, strict=True))


def test_console_view_shows_attention_input_and_targets(tmp_path: Path, shakespeare: PreparedData) -> None:
    done = run_preview("objective=mlm", "objective.mask_prob=0.4", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "bidirectional: every position sees every position" in done.stdout
    for row in ("original", "input", "targets", "counts", "[MASK]", "mask_prob=0.4", "example 2 of 2"):
        assert row in done.stdout
    assert list(tmp_path.iterdir()) == []


def test_preview_option_typo_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = run_preview("preview.examplez=3", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "preview.examplez" in done.stderr
    assert done.stdout == ""
    assert list(tmp_path.iterdir()) == []
