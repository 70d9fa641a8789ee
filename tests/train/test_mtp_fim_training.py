"""mtp and fim end to end through the real CLI: they train (loss falls) and report their measures; the dry-run
plan counts the multi-token modules' FLOPs; an mtp run exports as exactly clm's Llama; lmpt-fill writes a fim
run's middle; lmpt-preview shows fim (mtp: tests/objectives); bad settings are one line and exit 2; kill -9
resumes bit for bit."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import torch
from golden import BASE, assert_same, describe, env, golden_run, interrupted_run, records, start_golden
from runner import run_lmpt
from safetensors.torch import load_file

from lmpt.model.build import build_model
from lmpt.model.mtp import without_mtp_modules
from lmpt.rundir.trained import load_trained
from lmpt.train.init_from import load_origin, read_origin

MTP = [*BASE, "objective=mtp", "objective.mtp_depth=2"]
FIM = [*BASE, "objective=fim", "optimizer=adamw"]  # after 16 Muon steps the model ends the middle at once (fill)


@pytest.fixture(scope="module")
def gold(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the never-stopped runs live: the golden mtp run is also the trained run the other tests read."""
    root = tmp_path_factory.mktemp("golden")
    start_golden(root, MTP)
    start_golden(root, FIM)
    return root


@pytest.fixture(scope="module")
def runs(gold: Path) -> dict[str, Path]:
    """A tiny mtp run and a tiny fim run (BASE: 16 steps), trained side by side."""
    return {"mtp": golden_run(gold, MTP), "fim": golden_run(gold, FIM)}


@pytest.mark.parametrize("objective", ["mtp", "fim"])
def test_trains_loss_falls_and_reports_its_measures(runs: dict[str, Path], objective: str) -> None:
    logged = [r for r in records(runs[objective]) if "loss" in r]
    assert logged[-1]["loss"] < logged[0]["loss"] - 0.3
    last_val = [r for r in records(runs[objective]) if "val_loss" in r][-1]
    if objective == "mtp":  # the main loss on its own as `loss` (perplexity of it), each module's beside it
        for key in ("mtp_loss_1", "mtp_acc_1", "mtp_loss_2", "mtp_acc_2"):
            assert key in logged[-1] and f"val_{key}" in last_val
        assert logged[-1]["ppl"] == pytest.approx(math.exp(logged[-1]["loss"]), rel=1e-6)


def test_dry_run_plan_counts_the_multi_token_modules(tmp_path: Path) -> None:
    done = run_lmpt(*MTP, "trainer.dry_run=true", cwd=tmp_path)
    assert done.returncode == 0, describe(done)
    planned = float(re.search(r"training FLOPs\s*│?\s*([0-9.e+]+)", done.stdout).group(1))
    d, seq, vocab, steps, batch = 64, 64, 1024, 16, 8  # BASE: 2 layers, d_model 64, ffn 128, seq 64, batch 8
    block = 4 * d * d + 3 * d * 128  # qkv + o, gate_up + down
    clm = 6.0 * 2 * block + 12.0 * 2 * d * seq + 6.0 * d * vocab  # per token (vocab 1024: a multiple of 64)
    per_depth = 6.0 * (2 * d * d + block) + 12.0 * d * seq + 6.0 * d * vocab  # projection, block, shared head
    assert planned == pytest.approx(steps * batch * seq * (clm + 2 * per_depth), rel=1e-3)  # 4 digits printed
    assert planned > 1.5 * steps * batch * seq * clm


def test_mtp_run_exports_as_clm_llama_with_the_main_heads_logits(runs: dict[str, Path], tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    out = tmp_path / "hf"
    done = run_lmpt(str(runs["mtp"]), str(out), cwd=tmp_path, env=env(), command="lmpt-export")
    assert done.returncode == 0, describe(done)
    saved = load_file(runs["mtp"] / "model.safetensors")
    assert any(k.startswith("mtp.") for k in saved) and not any(
        "mtp" in k for k in load_file(out / "model.safetensors")
    )
    model = transformers.AutoModelForCausalLM.from_pretrained(out, local_files_only=True).eval()
    assert type(model).__name__ == "LlamaForCausalLM"
    trained = load_trained(runs["mtp"])
    ids = torch.tensor([[trained.tokenizer.special.eos, *trained.tokenizer.encode("First Citizen: speak, speak.")]])
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, trained.model.logits(ids), atol=1e-4, rtol=1e-4)


def test_init_from_an_mtp_run_carries_the_main_model_its_modules_start_fresh(runs: dict[str, Path]) -> None:
    trained, origin = load_trained(runs["mtp"]), read_origin(str(runs["mtp"]))
    for depth in (0, 2):  # a clm stage, an mtp stage (e.g. DeepSeek-V3's later mtp_weight=0.1)
        model = build_model(trained.config.model, "decoder", trained.model.vocab_size, 0, mtp_depth=depth)
        fresh = {k: v.clone() for k, v in model.state_dict().items() if k.startswith("mtp.")}
        load_origin(model, origin)
        assert bool(fresh) == (depth > 0)
        assert all(
            torch.equal(v, trained.model.state_dict()[k]) for k, v in without_mtp_modules(model.state_dict()).items()
        )
        assert all(torch.equal(model.state_dict()[k], v) for k, v in fresh.items())


def test_fill_writes_the_middle_of_a_fim_run(runs: dict[str, Path]) -> None:
    fill = lambda *a: run_lmpt(str(runs["fim"]), *a, cwd=runs["fim"].parent, env=env(), command="lmpt-fill")
    done = fill("prefix=First Citizen:", "suffix= the people.", "max_tokens=8", "json=true")
    assert done.returncode == 0, describe(done)
    result = json.loads(done.stdout)
    assert result["text"] == "First Citizen:" + result["middle"] + " the people." and 1 <= result["tokens"] <= 8
    assert result["middle"].strip()


def test_preview_shows_fim(tmp_path: Path) -> None:
    preview = lambda *a: run_lmpt(
        "tokenizer.vocab_size=1024", "data.seq_len=64", *a, cwd=tmp_path, env=env(), command="lmpt-preview"
    )
    fim = preview("objective=fim", "objective.fim_rate=1", "preview.json=true")
    assert fim.returncode == 0, describe(fim)
    document = json.loads(fim.stdout)
    assert document["objective"] == "fim" and "<fim_middle> <extra_id_99>" in document["attention"]
    assert all("<extra_id_97>" in example["input_pieces"] for example in document["examples"])


SOAK = pytest.mark.soak  # the objective tests refuse each in process; the CLI's one-line rule is shared code


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["objective=mtp", "objective.mtp_depth=-1"], "objective.mtp_depth=-1 must be 0 or more"),
        pytest.param(["objective=fim", "model.arch=encoder"], "objective fim cannot train an encoder", marks=SOAK),
        pytest.param(["objective=fim", "objective.fim_rate=1.5"], r"fim_rate=1.5 must be in \[0, 1\]", marks=SOAK),
        (["objective=fim", "tokenizer.num_sentinels=2"], "needs 3 reserved sentinel tokens"),
    ],
)
def test_bad_settings_are_one_line_and_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    done = run_lmpt(*BASE, *args, cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("lmpt: error: "), describe(done)
    assert re.search(message, lines[0]) and not [p for p in tmp_path.rglob("*") if p.is_file()]  # nothing written


@pytest.mark.parametrize("args", [MTP, pytest.param(FIM, marks=SOAK)])
def test_killed_and_restarted_run_is_bitwise_golden(args: list[str], gold: Path, tmp_path: Path) -> None:
    killed = interrupted_run(tmp_path, args, [{"LMPT_TEST_KILL_AFTER_BACKWARD": "7"}])
    assert_same(golden_run(gold, args), killed, f"{args[-2:]}, SIGKILL after backward 7 of 16 (checkpoint at 4)")
