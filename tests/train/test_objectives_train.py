"""Every objective trains end to end on its natural architecture, on both bundled corpora, and reports
its own measures; the masking-rate sweep shares one tokenizer and one token cache."""

from __future__ import annotations

from pathlib import Path

import pytest
from runner import SMALL, records, run_lmpt, val_losses

MEASURES = {
    "clm": {"val_acc"},
    "mlm": {"val_acc"},
    "nsp": {"val_acc", "val_nsp_acc", "val_mlm_loss", "val_nsp_loss"},
    "span": {"val_acc"},
    "prefix": {"val_acc"},
    "ul2-mixture": {"val_loss/R3-0.15", "val_loss/S", "val_loss/X64-0.5"},
}
ARCH = {
    "clm": "decoder",
    "mlm": "encoder",
    "nsp": "encoder",
    "span": "encoder-decoder",
    "prefix": "decoder",
    "ul2-mixture": "encoder-decoder",
}


CI_CORPUS = {
    "clm": "wikitext",
    "mlm": "shakespeare",
    "nsp": "shakespeare",
    "span": "wikitext",
    "prefix": "shakespeare",
    "ul2-mixture": "wikitext",
}
"""Each objective's corpus in CI, both corpora among them; the other pairs are soak tests (each ~12 s)."""


@pytest.mark.parametrize(
    ("objective", "data"),
    [
        pytest.param(o, d, marks=() if CI_CORPUS[o] == d else pytest.mark.soak)
        for o in MEASURES
        for d in ("shakespeare", "wikitext")
    ],
)
def test_objective_trains_and_reports_its_measures(tmp_path: Path, objective: str, data: str) -> None:
    run = tmp_path / "run"
    result = run_lmpt(
        *SMALL,
        f"objective={objective}",
        f"data={data}",
        "trainer.max_steps=40",
        "trainer.eval_every=10",
        "optimizer.lr=3e-3",
        "trainer.sample_tokens=0",
        f"hydra.run.dir={run}",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert f"{objective} on {'an' if ARCH[objective][0] == 'e' else 'a'} {ARCH[objective]}" in result.stdout
    val = val_losses(run)
    assert val[40] < val[10], val
    last_eval = [r for r in records(run) if "val_loss" in r][-1]
    assert MEASURES[objective] <= set(last_eval), set(last_eval)
    assert last_eval["val_ppl"] > 1


def test_mask_rate_sweep_shares_tokenizer_and_cache(tmp_path: Path) -> None:
    args = [a for a in SMALL if not a.startswith("tokenizer.")]
    result = run_lmpt(
        "-m",
        *args,
        "objective=mlm",
        "objective.mask_prob=0.05,0.15,0.4",
        "trainer.max_steps=2",
        "tokenizer.vocab_size=1000",
        cwd=tmp_path,  # a vocabulary no other test uses: this sweep builds it
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("training a SentencePiece unigram tokenizer") == 1
    assert result.stdout.count("tokenising ") == 1
    assert result.stdout.count("reusing tokenizer") == 2 and result.stdout.count("reusing token cache") == 2
    (sweep,) = (tmp_path / "multirun").glob("*/*")
    rates = sorted(float((sweep / j / "config.yaml").read_text().split("mask_prob: ")[1].split()[0]) for j in "012")
    assert rates == [0.05, 0.15, 0.4]
