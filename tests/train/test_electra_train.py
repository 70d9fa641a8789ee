"""`lmpt objective=electra` end to end with the real CLI: the loss falls, the logged FLOPs are the electra model's
(generator included), a run killed with SIGKILL resumes bit for bit, the discriminator is what load_trained and
lmpt-export give, the dry-run plan counts the generator, and a generator wider than the discriminator is refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from composed import composed
from golden import BASE, assert_same, describe, golden_run, interrupted_run, records, start_golden
from runner import run_lmpt
from safetensors.torch import load_file

from lmpt.config.schema import ModelConfig
from lmpt.console import console
from lmpt.downstream.eval_cli import evaluate
from lmpt.errors import LmptError
from lmpt.hf.export import export
from lmpt.inference.fill import fill
from lmpt.model.build import padded_vocab_size
from lmpt.model.language_model import LanguageModel
from lmpt.objectives.electra import ElectraConfig
from lmpt.objectives.registry import PlannedTokenizer, build_objective
from lmpt.rundir.trained import load_trained
from lmpt.tokenizer.special import SpecialTokens
from lmpt.train.plan import print_plan
from lmpt.train.precision import pick_precision
from lmpt.train.spec import resolve

ELECTRA = [*BASE, "objective=electra"]
MODEL = ModelConfig(name="test", d_model=64, n_layers=2, n_heads=2, ffn_dim=128, max_seq_len=1024)  # BASE's sizes


def planned(seq_len: int, vocab: int = 1024, **settings: object):
    """(objective, model on meta) as the dry run makes them for a tokenizer of `vocab` pieces."""
    tokenizer = PlannedTokenizer(SpecialTokens(num_sentinels=100), vocab)
    objective = build_objective(ElectraConfig(**settings), tokenizer, seq_len, "auto")
    with torch.device("meta"):
        return objective, objective.build_model(MODEL, padded_vocab_size(vocab))


@pytest.fixture(scope="module")
def gold_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("electra-golden")


@pytest.fixture(scope="module")
def gold(gold_dir: Path) -> Path:
    """The uninterrupted 16-step electra run (made once, by the first test that needs it)."""
    return golden_run(gold_dir, ELECTRA)


def test_killed_and_restarted_electra_run_is_bitwise_golden(gold_dir: Path, tmp_path: Path) -> None:
    """Masking, the generator's samples (seeded by the batch) and dropout's stream all resume exactly."""
    start_golden(gold_dir, ELECTRA)  # runs beside the killed one
    killed = interrupted_run(tmp_path, ELECTRA, [{"LMPT_TEST_KILL_AFTER_BACKWARD": "7"}])
    assert_same(golden_run(gold_dir, ELECTRA), killed, "electra, SIGKILL after backward 7")


def test_electra_learns_and_logs_its_measures_and_flops(gold: Path) -> None:
    steps = [r for r in records(gold) if "loss" in r]
    assert len(steps) == 16
    for key in ("gen_loss", "gen_acc", "disc_loss", "disc_acc", "replaced_frac", "mfu"):
        assert all(key in r for r in steps), key
    assert steps[-1]["loss"] < 0.9 * steps[0]["loss"]  # generator MLM + 50 x discriminator BCE
    assert steps[-1]["gen_loss"] < steps[0]["gen_loss"]
    for before, after in zip(steps, steps[1:], strict=False):  # replaced: the masked share less the equal samples
        masked_share = (after["loss_tokens"] - before["loss_tokens"]) / (after["tokens"] - before["tokens"])
        assert 0 < after["replaced_frac"] <= masked_share + 1e-6
    evaluation = [r for r in records(gold) if "val_loss" in r][-1]
    assert {"val_gen_loss", "val_disc_loss", "val_disc_acc", "val_replaced_frac", "val_ppl"} <= set(evaluation)
    # the FLOPs behind MFU and budgets: every example through both networks, the generator's head on the
    # loss-bearing (masked) positions; flops_per_example is affine in the head fraction
    _, model = planned(64)
    last, examples = steps[-1], 16 * 8
    base, full = model.flops_per_example(64, 0, 0.0), model.flops_per_example(64, 0, 1.0)
    assert last["flops"] == pytest.approx(examples * base + (full - base) * last["loss_tokens"] / 64, rel=1e-9)


def test_the_trained_discriminator_is_the_exported_encoder(gold: Path, tmp_path: Path) -> None:
    """load_trained (what lmpt-export and downstream fine-tuning read) takes the discriminator out of the final
    model.safetensors, which keeps both networks; lmpt-export writes it as the encoder it exports for mlm."""
    transformers = pytest.importorskip("transformers")
    trained = load_trained(gold)
    assert isinstance(trained.model, LanguageModel) and trained.arch == "encoder"
    saved = load_file(gold / "model.safetensors")
    assert torch.equal(trained.model.head_weight, saved["discriminator.body.embed.tokens.weight"])
    assert any(k.startswith("generator.") for k in saved)
    export([str(gold), str(tmp_path / "hf")])
    hf = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "hf", local_files_only=True).eval()
    assert type(hf).__name__ == "EuroBertForMaskedLM"
    ids = torch.tensor([trained.tokenizer.encode("First Citizen: Before we proceed any further, hear me speak.")])
    with torch.no_grad():
        ours = trained.model.body(ids)
        theirs = hf(ids, output_hidden_states=True).hidden_states[-1]
    torch.testing.assert_close(theirs, ours, atol=1e-4, rtol=1e-4)
    for command, argv in ((evaluate, ["data=bundled:wikitext-2-valid.txt"]), (fill, ["text=The [MASK] sat."])):
        with pytest.raises(LmptError, match="electra discriminator, which tells replaced tokens"):
            command([str(gold), *argv])


def test_dry_run_plan_counts_the_generator() -> None:
    """The plan `lmpt objective=electra trainer.dry_run=true` prints, made in process from the composed config."""
    overrides = [a for a in ELECTRA if not a.startswith("trainer.device")]
    cfg = composed(*overrides, "trainer.dry_run=true")
    with console.capture() as captured:
        print_plan(resolve(cfg, set()), pick_precision(cfg.trainer, torch.device("cpu")))
    text = captured.get()
    objective, model = planned(64)
    per_step = 8 * model.flops_per_example(64, 0, objective.expected_loss_fraction)
    assert f"{per_step:.3e} per step" in text
    shares = re.search(r"discriminator (\d+\.\d)% · generator (\d+\.\d)%", text)
    parts = model.flops_parts(64, 0.15)
    assert shares and float(shares[2]) == round(100 * parts["generator"] / sum(parts.values()), 1)
    assert parts["generator"] > 0.05 * per_step / 8


def test_a_generator_wider_than_the_discriminator_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """(0 and negative sizes take the same path; tests/objectives/test_electra_objective.py covers them.)"""
    size = "1.5"
    result = run_lmpt(*ELECTRA, f"objective.generator_size={size}", f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, describe(result)
    assert lines[0].startswith(f"lmpt: error: objective.generator_size={size}"), lines
    assert not (tmp_path / "run").exists()


@pytest.mark.soak
def test_electra_killed_between_micro_steps_resumes_bitwise(tmp_path: Path) -> None:
    """With gradient accumulation, a kill after the first micro-step of step 10 (backward 19) and a restart from
    the step-8 checkpoint: the micro-batches' sample seeds come from (seed, step, micro_step, rank) too."""
    args, gold = [*ELECTRA, "trainer.grad_accum=2"], tmp_path / "gold"
    gold.mkdir()
    start_golden(gold, args)
    killed = interrupted_run(tmp_path, args, [{"LMPT_TEST_KILL_AFTER_BACKWARD": "19"}])
    assert_same(golden_run(gold, args), killed, "electra, grad_accum=2, SIGKILL after backward 19")


@pytest.mark.soak
def test_a_sweep_over_mlm_and_electra_and_its_comparison(tmp_path: Path) -> None:
    """`lmpt -m objective=mlm,electra` runs both jobs; lmpt-compare puts electra's measures beside mlm's and ranks
    neither over the other (their val_loss measure different tasks)."""
    small = [a for a in BASE if not a.startswith(("trainer.max_steps", "trainer.eval_every", "trainer.ckpt_every"))]
    sweep = run_lmpt("-m", "objective=mlm,electra", *small, "trainer.max_steps=8", "trainer.eval_every=8", cwd=tmp_path)
    assert sweep.returncode == 0, describe(sweep)
    (sweep_dir,) = (tmp_path / "multirun").glob("*/*")
    compare = run_lmpt(str(sweep_dir), "out=report", cwd=tmp_path, command="lmpt-compare")
    assert compare.returncode == 0, describe(compare)
    table = (tmp_path / "report" / "compare.md").read_text()
    assert (
        "| objective=electra | electra | completed | 8 |" in table
        and "| objective=mlm | mlm | completed | 8 |" in table
    )
    assert "val_disc_acc" in table and "val_replaced_frac" in table and "Not ranked" in table
