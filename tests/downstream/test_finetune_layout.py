"""How examples become model inputs (lmpt.downstream.encoding) and how dotted keys parse (data.train=...),
with the tokenizer trained on the bundled corpus; no model needed."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from lmpt.config.command_options import parse_command, usage
from lmpt.data.cache import PreparedData
from lmpt.downstream.encoding import collate, encode_split, fit_pair
from lmpt.downstream.labelled import label_order
from lmpt.downstream.labelled_files import Example, TaskData
from lmpt.downstream.options import FinetuneOptions, labelled_name
from lmpt.errors import LmptError


def test_fit_pair_cuts_the_longer_text_first() -> None:
    assert fit_pair([1, 2, 3, 4, 5, 6], [7, 8], 5) == ([1, 2, 3], [7, 8])
    assert fit_pair([1, 2], [3, 4, 5, 6, 7], 4) == ([1, 2], [3, 4])
    assert fit_pair([1, 2, 3], None, 2) == ([1, 2], None)


@pytest.mark.parametrize("arch", ["encoder", "decoder", "encoder-decoder"])
def test_layouts_per_architecture(shakespeare: PreparedData, arch: str) -> None:
    tok = shakespeare.tokenizer
    sp = tok.special
    examples = [Example("To be, or not to be", "that is the question", "b"), Example("Ay me", "", "a")]
    split = encode_split(examples, {"a": 0, "b": 1}, tok, arch, 64, segments=True)
    a, b = tok.encode("To be, or not to be"), tok.encode("that is the question")
    want = {
        "encoder": [sp.cls, *a, sp.sep, *b, sp.sep],
        "decoder": [sp.eos, *a, sp.sep, *b, sp.eos],
        "encoder-decoder": [*a, sp.sep, *b, sp.eos],
    }[arch]
    assert split.rows[0].tolist() == want and split.labels.tolist() == [1, 0]
    if arch == "encoder":  # 0 through the first [SEP], 1 after
        assert split.segments[0].tolist() == [0] * (len(a) + 2) + [1] * (len(b) + 1)
    else:
        assert split.segments is None
    batch = collate(split, [1, 0], arch, sp)
    assert batch.input_ids.shape == (2, len(want)) and batch.input_ids[0, -1] == sp.pad
    assert (batch.decoder_input_ids is not None) == (arch == "encoder-decoder")
    cut = encode_split(examples, {"a": 0, "b": 1}, tok, arch, 8, segments=False)
    assert max(r.numel() for r in cut.rows) == 8 and cut.rows[0][-1] == want[-1]  # the closing marker stays


def test_labels_sort_numbers_numerically_then_strings() -> None:
    assert label_order(["10", "2", "-1", "2"]) == ["-1", "2", "10"]
    assert label_order(["not_entailment", "entailment"]) == ["entailment", "not_entailment"]


def test_task_name_defaults_to_the_folder_of_a_train_file() -> None:
    assert labelled_name(FinetuneOptions(TaskData("glue/SST-2/train.tsv", "d"))) == "SST-2"
    assert labelled_name(FinetuneOptions(TaskData("data/sst2_train.jsonl.gz", "d"))) == "sst2_train"
    assert labelled_name(FinetuneOptions(TaskData("x/train.tsv", "d"), task="mine")) == "mine"


@dataclass
class _Inner:
    path: str
    """Where."""
    count: int = 2
    """How many."""


@dataclass
class _Outer:
    inner: _Inner
    flag: bool = False
    """A flag."""


def test_dotted_keys_fill_a_nested_dataclass_and_show_in_help() -> None:
    args, options = parse_command(["RUN", "inner.path=a=b", "flag=true"], "prog", "s", [("RUN", "r")], _Outer)
    assert args == ["RUN"] and options == _Outer(_Inner("a=b", 2), True)
    with pytest.raises(LmptError, match="unknown key 'inner.nope'.*inner.path, inner.count, flag"):
        parse_command(["RUN", "inner.nope=1"], "prog", "s", [("RUN", "r")], _Outer)
    with pytest.raises(LmptError, match=r"needs inner.path=\.\.\."):
        parse_command(["RUN"], "prog", "s", [("RUN", "r")], _Outer)
    with pytest.raises(LmptError, match="inner.count='x' is not a valid int"):
        parse_command(["RUN", "inner.path=p", "inner.count=x"], "prog", "s", [("RUN", "r")], _Outer)
    text = usage("prog", "s", [("RUN", "r")], _Outer)
    assert "inner.path=" in text and "Where. (required)" in text and "How many. (default 2)" in text


def test_collate_keeps_rows_in_the_order_asked(shakespeare: PreparedData) -> None:
    split = encode_split(
        [Example("a b c d", None, "x"), Example("e", None, "y")],
        {"x": 0, "y": 1},
        shakespeare.tokenizer,
        "decoder",
        32,
        segments=False,
    )
    batch = collate(split, [1, 0], "decoder", shakespeare.tokenizer.special)
    assert torch.equal(batch.input_ids[1], split.rows[0]) and batch.input_ids[0, : split.rows[1].numel()].tolist() == (
        split.rows[1].tolist()
    )
