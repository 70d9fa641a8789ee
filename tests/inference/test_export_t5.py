"""lmpt-export of span and ul2-mixture runs trained with model.flavour=t5: a T5ForConditionalGeneration whose
logits are lmpt's, and whose generate() fills the sentinels of a corrupted input as lmpt does."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from runner import run_lmpt

from lmpt.hf.export import export
from lmpt.model.generate import sample
from lmpt.rundir.trained import load_trained

transformers = pytest.importorskip("transformers")
TINY = [
    "tokenizer.vocab_size=1024",
    "data.seq_len=64",
    "trainer.batch_size=8",
    "trainer.progress=plain",
    "trainer.sample_tokens=0",
    "trainer.eval_batches=1",
    "model.flavour=t5",
    "model.d_model=64",
    "model.n_heads=2",
    "model.ffn_dim=128",
    "model.n_layers=2",
    "optimizer.lr=3e-3",
    "scheduler.warmup_steps=5",
]
TEXT = "First Citizen: Before we proceed any <extra_id_0>, hear me <extra_id_1>. All: Speak, speak."


def train(tmp_path_factory: pytest.TempPathFactory, *overrides: str) -> Path:
    run = tmp_path_factory.mktemp("run") / "run"
    done = run_lmpt(*TINY, *overrides, f"hydra.run.dir={run}", cwd=run.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    return run


@pytest.fixture(scope="module")
def span_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """100 steps: enough to learn that a target spells out the sentinels in order."""
    return train(tmp_path_factory, "objective=span", "trainer.max_steps=100")


@pytest.fixture(scope="module")
def ul2_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train(tmp_path_factory, "objective=ul2-mixture", "trainer.max_steps=3")


def exported(run: Path, out: Path, capsys: pytest.CaptureFixture) -> torch.nn.Module:
    export([str(run), str(out)])
    assert "wrote a T5ForConditionalGeneration" in capsys.readouterr().out
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(out, local_files_only=True).eval()
    assert type(model).__name__ == "T5ForConditionalGeneration"
    return model


@pytest.mark.parametrize("which", ["span", "ul2-mixture"])
def test_exported_t5_logits_equal_lmpt(which: str, span_run: Path, ul2_run: Path, tmp_path: Path, capsys) -> None:
    run = span_run if which == "span" else ul2_run
    model, trained = exported(run, tmp_path / "hf", capsys), load_trained(run)
    special = trained.tokenizer.special
    inputs = torch.tensor([trained.tokenizer.encode(TEXT) + [special.eos]])
    targets = torch.tensor([[special.bos, special.sentinel(0), *trained.tokenizer.encode(" further"), special.eos]])
    with torch.no_grad():
        ours = trained.model.body(inputs, targets) @ trained.model.head_weight.t()
        theirs = model(input_ids=inputs, decoder_input_ids=targets).logits
    torch.testing.assert_close(theirs, ours, atol=1e-5, rtol=1e-5)


def test_transformers_generate_fills_the_sentinels(span_run: Path, tmp_path: Path, capsys) -> None:
    model, trained = exported(span_run, tmp_path / "hf", capsys), load_trained(span_run)
    special = trained.tokenizer.special
    corrupted = trained.tokenizer.encode(TEXT) + [special.eos]
    out = model.generate(torch.tensor([corrupted]), max_new_tokens=24, do_sample=False)[0].tolist()
    ours = sample(trained.model, [special.bos], 24, temperature=0, encoder_ids=corrupted, eos_id=special.eos)
    assert out[0] == special.bos and out[1:] == [*ours, special.eos][: len(out) - 1]  # lmpt's own greedy fill
    # the target format: <extra_id_0> span <extra_id_1> span ... eos, with at least one span not empty
    sentinels = {special.sentinel(i) for i in range(special.num_sentinels)}
    assert out[1] == special.sentinel(0) and special.sentinel(1) in out[2:] and out[-1] == special.eos
    assert [t for t in out[1:-1] if t not in sentinels], out
