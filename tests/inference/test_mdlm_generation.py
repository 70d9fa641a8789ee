"""A masked diffusion run (mdlm) samples by iterative unmasking with a `steps` key, and lmpt-export refuses it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch
from runner import TINY_MODEL, run_lmpt

from lmpt.config.schema import ModelConfig
from lmpt.errors import LmptError
from lmpt.model.generate import unmask
from lmpt.rng import generator
from lmpt.tokenizer.special import SpecialTokens

TINY = [
    "objective=mdlm",
    "tokenizer.vocab_size=1024",
    "data.seq_len=32",
    "trainer.batch_size=4",
    "trainer.max_steps=2",
    "trainer.sample_tokens=0",
    "trainer.progress=plain",
    "trainer.eval_batches=1",
    "objective.eval_draws=2",
    *TINY_MODEL,
]


def _command(command: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_lmpt(*args, cwd=cwd, command=command)


@pytest.fixture(scope="module")
def mdlm_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("mdlm") / "run"
    done = _command("lmpt", *TINY, f"hydra.run.dir={run}", cwd=run.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    return run


def _model():
    from lmpt.objectives.mdlm import MaskPredictor, never_predicted

    special = SpecialTokens(num_sentinels=8)
    torch.manual_seed(0)
    cfg = ModelConfig(d_model=16, n_layers=1, n_heads=2, ffn_dim=32, max_seq_len=24)
    model = MaskPredictor(cfg, "encoder", 128, special.pad, excluded=never_predicted(special, 128, 100)).eval()
    never = special.reserved_mask(100)
    never[special.eos] = False
    return model, special, never


@pytest.mark.parametrize("steps", [1, 3, 10, 50])
def test_unmasking_fills_every_mask_keeps_the_prompt_and_draws_no_reserved_id(steps: int) -> None:
    model, special, never = _model()
    prompt = [special.first_ordinary + 5, special.first_ordinary + 9]
    calls: list[int] = []
    new = unmask(model, prompt, 10, steps, 1.0, generator(0, "g"), special.mask, never, on_step=calls.append)
    assert len(new) == 10 and special.mask not in new
    assert all(t < 100 and (not bool(never[t])) for t in new)
    assert sum(calls) == 10 and len(calls) == min(steps, 10)  # the masks run out on the last step


def test_unmasking_is_a_function_of_the_seed() -> None:
    model, special, never = _model()
    a = unmask(model, [], 12, 4, 0.8, generator(1, "g"), special.mask, never)
    b = unmask(model, [], 12, 4, 0.8, generator(1, "g"), special.mask, never)
    assert a == b


def test_too_few_steps_or_too_long_is_refused() -> None:
    model, special, never = _model()
    with pytest.raises(LmptError, match="steps=0"):
        unmask(model, [], 4, 0, 1.0, generator(0), special.mask, never)
    with pytest.raises(LmptError, match="the model takes 24"):
        unmask(model, [special.first_ordinary] * 20, 8, 2, 1.0, generator(0), special.mask, never)


def test_lmpt_generate_samples_an_mdlm_run_over_its_steps(mdlm_run: Path) -> None:
    done = _command(
        "lmpt-generate",
        str(mdlm_run),
        "prompt=The king",
        "max_tokens=8",
        "steps=4",
        "json=true",
        cwd=mdlm_run.parent,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["tokens"] == 8 and result["steps"] == 4 and result["text"].startswith("The king")


@pytest.mark.parametrize("steps", ["0", "-2"])
def test_a_step_count_below_one_is_one_line_exit_2(mdlm_run: Path, steps: str) -> None:
    done = _command("lmpt-generate", str(mdlm_run), f"steps={steps}", cwd=mdlm_run.parent)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and f"steps={steps} must be at least 1" in lines[0], done.stderr


def test_lmpt_export_refuses_an_mdlm_run_in_one_line(mdlm_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "exported"
    done = _command("lmpt-export", str(mdlm_run), str(out), cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "transformers has no model class for it" in lines[0] and not out.exists()


def test_the_run_logs_the_bound_in_bits_per_token_with_its_stderr(mdlm_run: Path) -> None:
    last = json.loads((mdlm_run / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["val_bits_per_token"] > 0 and last["val_bits_per_token_stderr"] > 0
