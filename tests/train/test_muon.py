"""optimizer=muon (issue #24, point 3): torch.optim.Muon on the blocks' 2-D matrices and AdamW on the rest, one
optimizer to the loop: the schedule drives both, both states are checkpointed, a run killed with SIGKILL resumes bit
for bit, it runs under DDP (real torchrun, gloo), and FSDP is refused in one line."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch
from composed import composed
from golden import BASE, assert_same, describe, golden_run, interrupted_run, records, run, start_golden
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf
from test_distributed import torchrun

from lmpt.config.errors import describe as one_line
from lmpt.config.schema import ModelConfig, MuonConfig, SchedulerConfig
from lmpt.config.validate import validate_config
from lmpt.errors import LmptError
from lmpt.model.build import build_model
from lmpt.private_api import muon_default_newton_schulz
from lmpt.train.optim import MuonWithAdamW, build_optimizer, build_scheduler, newton_schulz_dtype, newton_schulz_float32

CPU = torch.device("cpu")
MUON = OmegaConf.structured(MuonConfig())


def tiny(arch: str = "decoder", flavour: str = "llama", classes: int = 0) -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = OmegaConf.structured(ModelConfig(name="tiny", d_model=32, n_layers=2, n_heads=2, ffn_dim=64, flavour=flavour))
    return build_model(cfg, arch, 64, 0, n_sequence_classes=classes)


@pytest.mark.parametrize(
    ("arch", "flavour", "classes"),
    [("decoder", "llama", 0), ("encoder", "llama", 2), ("encoder-decoder", "t5", 0)],
    ids=["clm-decoder", "nsp-encoder", "t5-encoder-decoder"],
)
def test_muon_takes_the_hidden_matrices_and_adamw_the_rest(arch: str, flavour: str, classes: int) -> None:
    model = tiny(arch, flavour, classes)
    optimizer = build_optimizer(MUON, model, CPU)
    muon, adamw = optimizer.parts["muon"], optimizer.parts["adamw"]
    names = {id(p): n for n, p in model.named_parameters()}
    in_muon = {names[id(p)] for g in muon.param_groups for p in g["params"]}
    in_adamw = {names[id(p)] for g in adamw.param_groups for p in g["params"]}
    assert in_muon.isdisjoint(in_adamw) and in_muon | in_adamw == set(names.values())  # each exactly once
    assert in_muon and all(".blocks." in n and model.get_parameter(n).ndim == 2 for n in in_muon)
    assert {n for n in in_muon if n.endswith((".qkv.weight", ".o.weight", ".gate_up.weight", ".down.weight"))}
    assert "body.embed.tokens.weight" in in_adamw  # the tied head too
    assert all(model.get_parameter(n).ndim == 1 for n in in_adamw if "norm" in n)
    if classes:
        assert {"sequence_head.0.weight", "sequence_head.0.bias", "sequence_head.2.weight"} <= in_adamw
    if flavour == "t5":
        assert {"lm_head.weight", "body.encoder.relative_bias.table.weight"} <= in_adamw


def test_the_schedule_drives_both_optimizers() -> None:
    model = tiny()
    optimizer = build_optimizer(MUON, model, CPU)
    scheduler = build_scheduler(OmegaConf.structured(SchedulerConfig(warmup_steps=4)), optimizer, 20)
    for step in range(6):
        share = scheduler.lr_lambdas[0](step)
        assert optimizer.parts["muon"].param_groups[0]["lr"] == pytest.approx(MUON.lr * share)
        assert all(g["lr"] == pytest.approx(MUON.adamw_lr * share) for g in optimizer.parts["adamw"].param_groups)
        loss = model.logits(torch.randint(1, 64, (2, 8))).logsumexp(-1).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()


def train(model, optimizer, steps: int, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        ids = torch.randint(1, 64, (2, 8), generator=generator)
        model.logits(ids).logsumexp(-1).mean().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def test_both_states_round_trip_through_a_weights_only_file() -> None:
    """Momentum buffers of Muon and both Adam moments are saved and restored: the copies then step identically."""
    model = tiny()
    optimizer = build_optimizer(MUON, model, CPU)
    train(model, optimizer, 3, seed=1)
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, buffer)
    buffer.seek(0)
    saved = torch.load(buffer, weights_only=True)
    assert set(saved["optimizer"]) == {"muon", "adamw"}
    assert any("momentum_buffer" in s for s in saved["optimizer"]["muon"]["state"].values())
    assert any("exp_avg_sq" in s for s in saved["optimizer"]["adamw"]["state"].values())
    copy = tiny()
    copy.load_state_dict(saved["model"])
    restored = build_optimizer(MUON, copy, CPU)
    restored.load_state_dict(saved["optimizer"])
    train(model, optimizer, 2, seed=2)
    train(copy, restored, 2, seed=2)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), copy.state_dict().values(), strict=True))
    assert isinstance(restored, MuonWithAdamW)
    assert restored.param_groups[0] is restored.parts["muon"].param_groups[0]  # the scheduler still reaches both


AVX2_ONLY = frozenset({"fpu", "avx", "avx2", "fma"})
NATIVE_BF16 = AVX2_ONLY | {"avx512f", "avx512bw", "avx512_bf16"}


def test_newton_schulz_runs_in_float32_only_where_bf16_would_be_emulated() -> None:
    """An AVX2-only CPU computes bf16 by emulation (20 times the float32 cost of Muon's iteration, two thirds of the
    default run's step there): Muon orthogonalises in float32 on it, in PyTorch's bf16 wherever bf16 is native."""
    assert newton_schulz_dtype(CPU, AVX2_ONLY) == torch.float32
    assert newton_schulz_dtype(CPU, NATIVE_BF16) == torch.bfloat16
    assert newton_schulz_dtype(torch.device("cuda"), AVX2_ONLY) == torch.bfloat16


@pytest.mark.parametrize("shape", [(24, 40), (40, 24), (32, 32)], ids=["wide", "tall", "square"])
def test_the_float32_iteration_is_torchs_iteration(shape: tuple[int, int]) -> None:
    """Same quintic, coefficients, steps and orientation as torch.optim.Muon's bf16 one: the two agree to bf16's
    precision, and the float32 result is nearer the exact orthogonalisation's singular values (about 1)."""
    grad = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    defaults = torch.optim.Muon([torch.nn.Parameter(grad.clone())]).defaults
    args = (defaults["ns_coefficients"], defaults["ns_steps"], 1e-7)
    ours, torchs = newton_schulz_float32(grad, *args), muon_default_newton_schulz()(grad, *args)
    assert ours.dtype == torch.float32 and ours.shape == grad.shape
    assert (ours - torchs.float()).abs().max() < 0.05
    singular = torch.linalg.svdvals(ours)
    assert singular.min() > 0.5 and singular.max() < 1.5  # the iteration's US'V^T, S' in about (0.5, 1.5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bf16"])
def test_a_muon_step_orthogonalises_in_its_dtype_and_leaves_torch_as_it_was(dtype: torch.dtype) -> None:
    """One step with no momentum and no decay moves a square matrix by exactly -lr x NS(grad) in the chosen
    dtype's iteration; PyTorch's own iteration is back in place after the step."""
    weight = torch.nn.Parameter(torch.randn(16, 16, generator=torch.Generator().manual_seed(1)))
    grad = torch.randn(16, 16, generator=torch.Generator().manual_seed(2))
    start = weight.detach().clone()
    muon = torch.optim.Muon([weight], lr=0.1, weight_decay=0.0, momentum=0.0, nesterov=False)
    bias = torch.nn.Parameter(torch.zeros(3))
    optimizer = MuonWithAdamW(muon, torch.optim.AdamW([bias]), newton_schulz=dtype)
    weight.grad, bias.grad = grad.clone(), torch.zeros(3)
    iteration = newton_schulz_float32 if dtype == torch.float32 else muon_default_newton_schulz()
    ns = (muon.defaults["ns_coefficients"], muon.defaults["ns_steps"], muon.defaults["eps"])
    expected = start.add(iteration(grad, *ns), alpha=-0.1)
    optimizer.step()
    assert torch.equal(weight.detach(), expected)
    assert muon_default_newton_schulz() is not newton_schulz_float32


def test_fsdp_is_refused_in_one_line() -> None:
    cfg = composed("optimizer=muon", "trainer.strategy=fsdp")
    with pytest.raises(
        LmptError, match=r"optimizer=muon does not run under trainer.strategy=fsdp.*trainer.strategy=ddp"
    ):
        validate_config(cfg)
    with pytest.raises(ConfigCompositionException) as refused:  # a fixed choice: refused as it composes
        composed("optimizer=muon", "optimizer.adjust_lr_fn=sqrt")
    assert one_line(refused.value).startswith("optimizer.adjust_lr_fn: Invalid value 'sqrt', expected one of [orig")


def test_a_learning_rate_beyond_float32_is_refused_at_start_up(tmp_path: Path) -> None:
    """AdamW at 1e39 runs until its weights turn inf (reported, nothing saved); Muon's step would stop with
    torch's overflow error instead, so the setting is refused before anything is written."""
    result = run(tmp_path / "run", [*BASE, "optimizer=muon", "optimizer.lr=1e39"])
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, describe(result)
    assert lines[0].startswith("lmpt: error: optimizer.lr=1e+39 is invalid: it must be <= 1e30"), lines[0]
    assert not (tmp_path / "run" / "checkpoints").exists()


MUON_RUN = [*BASE, "optimizer=muon", "trainer.max_steps=8", "trainer.eval_every=4"]
"""8 tiny steps, a checkpoint every 4."""


def test_a_killed_muon_run_resumes_bitwise(tmp_path_factory: pytest.TempPathFactory) -> None:
    gold, killed = tmp_path_factory.mktemp("muon-golden"), tmp_path_factory.mktemp("muon-killed")
    start_golden(gold, MUON_RUN)
    resumed = interrupted_run(killed, MUON_RUN, [{"LMPT_TEST_KILL_AFTER_BACKWARD": "6"}])  # after step 4's checkpoint
    assert_same(golden_run(gold, MUON_RUN), resumed, "optimizer=muon, SIGKILL after backward 6")


@pytest.mark.soak  # ~1 min: a torchrun launch of two processes and a single process, on 2 shared cores
def test_muon_under_ddp_matches_one_process(tmp_path) -> None:
    """Two ranks of 4 sequences each take the same steps as one process of 8: Muon sees the all-reduced gradient."""
    args = [a for a in MUON_RUN if not a.startswith("trainer.batch_size")]
    ddp = torchrun(*args, "trainer.batch_size=4", f"hydra.run.dir={tmp_path / 'ddp'}", cwd=tmp_path)
    assert ddp.returncode == 0, ddp.stderr[-3000:]
    assert "x 2 processes" in ddp.stdout
    single = run(tmp_path / "single", [*args, "trainer.batch_size=8"])
    assert single.returncode == 0, describe(single)
    one = [(r["step"], r["loss"]) for r in records(tmp_path / "single") if "loss" in r]
    two = [(r["step"], r["loss"]) for r in records(tmp_path / "ddp") if "loss" in r]
    assert [s for s, _ in one] == [s for s, _ in two] and len(one) == 8
    for (step, a), (_, b) in zip(one, two, strict=True):
        assert b == pytest.approx(a, rel=1e-4, abs=1e-4), step
