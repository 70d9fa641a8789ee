"""The coloured view renders every objective and architecture, in process (fast), from a composed config."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from rich.console import Console

from lmpt.config.resolvers import register_resolvers
from lmpt.config.store import conf_dir, register_schemas
from lmpt.data.cache import PreparedData
from lmpt.errors import LmptError
from lmpt.objectives.registry import register_objective_schemas
from lmpt.preview.config import PRIMARY_CONFIG, register_preview_config
from lmpt.preview.examples import Preview, build_preview
from lmpt.preview.render import render_preview

SMALL = ["tokenizer.vocab_size=1024", "data.seq_len=64"]


def make_preview(*overrides: str) -> Preview:
    register_schemas()
    register_objective_schemas()
    register_resolvers()
    register_preview_config()
    with initialize_config_dir(str(conf_dir()), version_base=None):
        cfg = compose(PRIMARY_CONFIG, overrides=[*SMALL, *overrides])
    return build_preview(cfg)


def rendered(preview: Preview, width: int = 0) -> str:
    out = io.StringIO()
    render_preview(preview, Console(file=out, width=100, color_system="truecolor"), width)
    return out.getvalue()


@pytest.mark.parametrize(
    "overrides,expected",
    [
        (["objective=clm"], ["causal", "next token at every position"]),
        (["objective=mlm"], ["bidirectional", "[MASK]", "80/10/10"]),
        (["objective=nsp"], ["[CLS]", "[SEP]", "pair"]),
        (["objective=nsp", "objective.variant=sop"], ["in-order", "[CLS]"]),
        (["objective=electra"], ["[MASK]", "100/0/0", "the generator's samples replace the selected tokens"]),
        (["objective=span"], ["<extra_id_0>", "encoder input", "noise in"]),
        (["objective=span", "model.arch=decoder"], ["<extra_id_0>", "prefix"]),
        (["objective=prefix"], ["prefix length", "suffix (predicted)"]),
        (["objective=ul2-mixture", "preview.examples=6"], ["denoiser", "mode token"]),
        (["objective=ul2-mixture", "model.arch=decoder"], ["denoiser", "prefix"]),
        (["objective=mlm", "objective.mask_prob_schedule=linear"], ["the rate moves 0.3 -> 0.15 (linear)", "[MASK]"]),
        (["objective=clm-then-mlm"], ["clm for steps 0-99, mlm from step 100 of 200", "next token at every position"]),
        (["objective=clm-then-mlm", "preview.step=150"], ["mlm from step 100", "[MASK]", "80/10/10"]),
        (["objective=gpt-bert"], ["predicted at the position before them", "[MASK]", "causal_ratio=0.0625"]),
        (["objective=gpt-bert", "objective.causal_ratio=1.0"], ["next token at every position (causal batch)"]),
    ],
)
def test_every_objective_renders(overrides: list[str], expected: list[str], shakespeare: PreparedData) -> None:
    preview = make_preview(*overrides)
    text = rendered(preview)
    assert preview.objective.describe_attention().split(":")[0] in text
    for fragment in expected:
        assert fragment in text, fragment
    assert "\x1b[" in text  # coloured


def test_width_cuts_rows_and_train_split_follows_the_step(shakespeare: PreparedData) -> None:
    preview = make_preview("objective=mlm", "preview.split=train", "preview.step=3")
    assert "+54 tokens" in rendered(preview, width=10)
    again = make_preview("objective=mlm", "preview.split=train", "preview.step=3")
    other = make_preview("objective=mlm", "preview.split=train", "preview.step=4")
    assert [e.offset for e in preview.examples] == [e.offset for e in again.examples]
    assert [e.offset for e in preview.examples] != [e.offset for e in other.examples]


@pytest.mark.parametrize(
    "override", ["preview.examples=0", "preview.split=test", "preview.width=-1", "preview.step=-2"]
)
def test_bad_preview_values_are_refused(override: str, shakespeare: PreparedData) -> None:
    with pytest.raises(LmptError, match=override.split("=")[0]):
        make_preview(override)


def test_composing_writes_nothing_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shakespeare: PreparedData
) -> None:
    monkeypatch.chdir(tmp_path)
    make_preview("objective=span")
    assert list(tmp_path.iterdir()) == []


def test_a_mixture_names_each_examples_source() -> None:
    """Training windows of data=mixture come from both sources in the drawn proportions; each names its own."""
    preview = make_preview("data=mixture", "preview.split=train", "preview.examples=24", "preview.step=3")
    sources = [e.source for e in preview.examples]
    assert set(sources) == {"shakespeare", "wikitext"}
    text = rendered(preview)
    assert "source shakespeare" in text and "source wikitext" in text
    assert make_preview("preview.examples=2").examples[0].source is None  # one source: nothing to name
