"""Training with a pretrained tokenizer and exporting it (issue 14, points 2 and 5), through the real CLI:
`tokenizer=hf tokenizer.path=...` trains on the file's own ids with the model's vocabulary padded to a
multiple of 64; lmpt-export writes a tokenizer that transformers' AutoTokenizer loads and that encodes text to
the same ids; bad tokenizer input is one line and exit code 2."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch
from golden import describe, env
from hf_files import gpt2_style, wordpiece
from runner import run_lmpt
from test_bad_input import one_error_line

from lmpt.rundir.trained import load_trained
from lmpt.tokenizer.special import sentinel_piece

TINY = [
    "data.seq_len=64",
    "trainer.batch_size=8",
    "trainer.max_steps=3",
    "trainer.sample_tokens=8",
    "trainer.progress=plain",
    "trainer.eval_batches=1",
    "trainer.device=cpu",
    "model.n_layers=1",
    "model.d_model=64",
    "model.n_heads=2",
    "model.ffn_dim=128",
]
TEXT = "First Citizen:\nBefore we proceed any further, hear me speak.\n\tCaf\u00e9  \u00e9t\u00e9! 1603"


def lmpt(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return run_lmpt(*args, cwd=cwd, env=env())


def export(run: Path, out: Path) -> None:
    done = run_lmpt(str(run), str(out), cwd=run.parent, env=env(), command="lmpt-export")
    assert done.returncode == 0, describe(done)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hf-files")
    gpt2_style(root / "gpt2")
    wordpiece(root / "wordpiece")
    wordpiece(root / "t5ish", extra_special=tuple(sentinel_piece(i) for i in range(2)))
    (root / "broken.json").write_text('{"model": {"type": "BPE", "vocab": ')
    return root


def test_gpt2_style_trains_and_exports_to_the_same_ids(files: Path, tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    run = tmp_path / "run"
    done = lmpt(tmp_path, *TINY, "tokenizer=hf", f"tokenizer.path={files / 'gpt2'}", f"hydra.run.dir={run}")
    assert done.returncode == 0, describe(done)
    assert (run / "tokenizer.json").is_file() and not (run / "tokenizer.model").exists()
    trained = load_trained(run)
    assert trained.tokenizer.vocab_size == 807  # 700 of the file, pad/mask/cls/sep/3 modes/100 sentinels added
    assert trained.model.body.embed.tokens.weight.shape[0] == 832  # padded to a multiple of 64
    export(run, tmp_path / "hf")
    hf_tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf", local_files_only=True)
    eos = trained.tokenizer.special.eos
    assert hf_tok(TEXT)["input_ids"] == [eos, *trained.tokenizer.encode(TEXT)]  # a decoder reads text after eos
    assert hf_tok.decode(hf_tok(TEXT)["input_ids"], skip_special_tokens=True) == TEXT
    assert (hf_tok.eos_token, hf_tok.bos_token, hf_tok.pad_token) == ("<|endoftext|>", "<|endoftext|>", "<pad>")
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf", local_files_only=True).eval()
    ids = torch.tensor([[eos, *trained.tokenizer.encode(TEXT)]])
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, trained.model.logits(ids), atol=1e-4, rtol=1e-4)


def test_wordpiece_mlm_trains_and_exports_to_the_same_ids(files: Path, tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    run = tmp_path / "run"
    done = lmpt(
        tmp_path,
        *TINY,
        "objective=mlm",
        "tokenizer=hf",
        f"tokenizer.path={files / 'wordpiece' / 'tokenizer.json'}",
        "tokenizer.num_sentinels=0",
        f"hydra.run.dir={run}",
    )
    assert done.returncode == 0, describe(done)
    trained = load_trained(run)
    assert trained.tokenizer.vocab_size == 605  # 600 + <s>, </s> and the 3 mode tokens; no sentinels asked for
    assert trained.model.body.embed.tokens.weight.shape[0] == 640  # padded to a multiple of 64
    export(run, tmp_path / "hf")
    hf_tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf", local_files_only=True)
    text = f"{TEXT} the [MASK] of rome"
    assert hf_tok(text)["input_ids"] == trained.tokenizer.encode(text)  # no [CLS]/[SEP] added: as lmpt trained
    assert (hf_tok.mask_token_id, hf_tok.cls_token_id, hf_tok.pad_token_id) == (4, 2, 0)


def test_bad_tokenizer_input_is_one_line_exit_2(files: Path, tmp_path: Path) -> None:
    base = [*TINY, "tokenizer=hf", f"hydra.run.dir={tmp_path / 'run'}"]
    cases = {
        f"tokenizer.path={tmp_path / 'missing.json'}": "tokenizer file not found",
        f"tokenizer.path={files / 'broken.json'}": "is not a tokenizer.json the tokenizers library can read",
        f"tokenizer.path={files / 'gpt2'} tokenizer.vocab_size=1024": "tokenizer.vocab_size=1024 cannot be set",
        f"tokenizer.path={files / 't5ish'} objective=span": "the tokenizer has 2 sentinels",
    }
    for overrides, said in cases.items():
        line = one_error_line(lmpt(tmp_path, *base, *overrides.split()))
        assert said in line, (overrides, line)
    assert not (tmp_path / "run").exists()
