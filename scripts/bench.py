"""Training throughput of lmpt against Hugging Face transformers on the same shapes, data and optimizer.

Per objective the two systems train side by side in this one process, alternating runs (lmpt, hf, lmpt,
hf, ...), on the same pre-made batches (lmpt's objectives over the bundled corpus, identical token ids for
both), with AdamW (fused where the device has it), gradient clipping at 1.0, and fp32 or bf16 autocast.
The figure is the ratio of median tokens/s (docs/benchmarks.md; method in the BENCHMARKS guide).

    pip install -e ".[bench]"
    python scripts/bench.py --objectives clm,mlm,span --precisions fp32,bf16 --json bench.json
    python scripts/bench.py --systems lmpt,lmpt-compiled,hf,hf-compiled --json bench.json
    python scripts/bench.py --device cuda --preset gpt2-124m --objectives clm --precisions bf16 \
        --systems lmpt-compiled,lmpt,hf
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from omegaconf import OmegaConf
from rich.console import Console
from rich.table import Table
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
from lmpt.batch import IGNORE, Batch
from lmpt.config.schema import AdamWConfig, DataConfig, ModelConfig, TokenizerConfig
from lmpt.data.cache import prepare_corpora
from lmpt.data.sampler import StepLayout, WindowSampler
from lmpt.model import LanguageModel, build_model
from lmpt.objectives.base import Objective
from lmpt.objectives.clm import ClmConfig
from lmpt.objectives.mlm import MlmConfig
from lmpt.objectives.registry import build_objective
from lmpt.objectives.span import SpanConfig
from lmpt.rng import generator
from lmpt.train.metrics import DATASHEET_BF16_PEAK, measured_matmul_peak
from lmpt.train.optim import build_optimizer, parameter_groups

PRESETS: dict[str, dict[str, int]] = {
    # d_ff is the reference's 2-matrix FFN width; lmpt's SwiGLU gets 2*d_ff/3 so the FFN parameters match.
    "cpu-small": dict(d_model=256, n_layers=4, n_heads=4, d_ff=1024, vocab=8192, seq_len=256, batch=16),
    "gpt2-124m": dict(d_model=768, n_layers=12, n_heads=12, d_ff=3072, vocab=50304, seq_len=1024, batch=8),
    "bert-110m": dict(d_model=768, n_layers=12, n_heads=12, d_ff=3072, vocab=30528, seq_len=128, batch=128),
}
OBJECTIVE_CONFIGS = {"clm": ClmConfig, "mlm": MlmConfig, "span": SpanConfig}
REFERENCE = {"clm": "GPT2LMHeadModel", "mlm": "BertForMaskedLM", "span": "T5ForConditionalGeneration"}
TOKENIZER_VOCAB = 8192  # trained on the bundled corpus; a preset's larger model vocabulary just has unused rows
LR, BETAS, EPS, WEIGHT_DECAY, CLIP = 3e-4, (0.9, 0.95), 1e-8, 0.1, 1.0


@dataclass
class System:
    """One model under test: a step function over a batch and its model FLOPs per example."""

    name: str
    """"lmpt" or "hf"."""
    compiled: bool
    model: nn.Module
    step: Callable[[Batch], None]
    flops_per_example: float
    runs: list[float] = field(default_factory=list)  # seconds per step, one entry per timed run


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--objectives", default="clm,mlm,span", help="comma-separated: clm, mlm, span")
    p.add_argument("--precisions", default="fp32,bf16", help="comma-separated: fp32, bf16")
    p.add_argument("--preset", default="cpu-small", choices=sorted(PRESETS), help="model and batch shapes")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--steps", type=int, default=4, help="timed optimizer steps per run")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps before each run")
    p.add_argument("--repeats", type=int, default=3, help="runs per system (alternating A B A B ...)")
    p.add_argument("--batch", type=int, default=None, help="override the preset's batch size")
    p.add_argument("--seq-len", type=int, default=None, help="override the preset's sequence length")
    p.add_argument(
        "--systems",
        default="lmpt,hf",
        help="comma-separated, run in this order: lmpt, lmpt-compiled (trainer.compile=true), hf, "
        "hf-compiled (torch.compile on the whole reference model)",
    )
    p.add_argument("--cache-dir", default=None, help="token cache root (default: a fresh temporary directory)")
    p.add_argument("--json", default=None, help="write the records as a JSON list to this path")
    return p.parse_args(argv)


# -- data ---------------------------------------------------------------------------------------------
def make_batches(objective: Objective, sampler: WindowSampler, n: int, seed: int = 0) -> list[Batch]:
    """n batches made exactly as `lmpt` makes them for steps 0..n-1."""
    return [objective.make_batch(sampler.windows(s), generator(seed, "bench", s)) for s in range(n)]


def data_path_seconds(objective: Objective, sampler: WindowSampler, n: int = 20) -> float:
    """Median seconds to read one batch's windows from the token cache and corrupt and collate them."""
    times = []
    for s in range(n):
        start = time.perf_counter()
        objective.make_batch(sampler.windows(1000 + s), generator(1, "bench", s))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def count_tokens(batch: Batch, pad_id: int) -> tuple[int, int]:
    """(non-padding input tokens, loss-bearing tokens): padding is not work."""
    total = int((batch.input_ids != pad_id).sum())
    if batch.decoder_input_ids is not None:
        total += int((batch.decoder_input_ids != pad_id).sum())
    return total, int((batch.labels != IGNORE).sum())


# -- models -------------------------------------------------------------------------------------------
def lmpt_ffn_dim(reference_d_ff: int) -> int:
    """SwiGLU width with the FFN parameters of a 2-matrix reference (3 d f = 2 d d_ff), rounded up to a
    multiple of 16: odd widths (683) hit slow matmul kernels, and rounding up gives lmpt more work, not less."""
    return -(-2 * reference_d_ff // (3 * 16)) * 16


def build_lmpt(shape: dict[str, int], objective: Objective, vocab: int) -> LanguageModel:
    cfg = ModelConfig(
        name="bench",
        d_model=shape["d_model"],
        n_layers=shape["n_layers"],
        n_heads=shape["n_heads"],
        ffn_dim=lmpt_ffn_dim(shape["d_ff"]),
        max_seq_len=max(objective.seq_len, objective.target_length),
        dropout=0.0,
    )
    return build_model(cfg, objective.arch, vocab, objective.special.pad)


def build_hf(name: str, shape: dict[str, int], objective: Objective, vocab: int) -> nn.Module:
    """The reference model from a config: random init, nothing downloaded, its default attention (sdpa)."""
    import transformers as tf

    d, layers, heads, d_ff = shape["d_model"], shape["n_layers"], shape["n_heads"], shape["d_ff"]
    special, positions = objective.special, max(objective.seq_len, objective.target_length)
    if name == "clm":
        cfg = tf.GPT2Config(
            vocab_size=vocab,
            n_positions=positions,
            n_embd=d,
            n_layer=layers,
            n_head=heads,
            n_inner=d_ff,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            bos_token_id=special.bos,
            eos_token_id=special.eos,
            use_cache=False,
        )
        return tf.GPT2LMHeadModel(cfg)
    if name == "mlm":
        cfg = tf.BertConfig(
            vocab_size=vocab,
            hidden_size=d,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            intermediate_size=d_ff,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            max_position_embeddings=positions,
            pad_token_id=special.pad,
        )
        return tf.BertForMaskedLM(cfg)
    cfg = tf.T5Config(
        vocab_size=vocab,
        d_model=d,
        d_kv=d // heads,
        d_ff=d_ff,
        num_layers=layers,
        num_decoder_layers=layers,
        num_heads=heads,
        dropout_rate=0.0,
        feed_forward_proj="relu",
        tie_word_embeddings=True,
        pad_token_id=special.pad,
        eos_token_id=special.eos,
        decoder_start_token_id=special.bos,
        use_cache=False,
    )
    return tf.T5ForConditionalGeneration(cfg)


def hf_inputs(name: str, batch: Batch, pad_id: int) -> dict:
    """The lmpt batch as the reference model's keyword arguments: the same ids and the same targets."""
    if name == "clm":
        # lmpt's labels are already shifted: hand them to HF's causal loss as shift_labels (no second shift).
        return dict(input_ids=batch.input_ids, labels=batch.labels, shift_labels=batch.labels)
    padded = bool((batch.input_ids == pad_id).any())
    mask = (batch.input_ids != pad_id).long() if padded else None
    # mlm: labels are IGNORE (-100) off the 15% selected; span: HF derives decoder inputs from labels
    # (shifted right behind decoder_start_token_id = bos, -100 -> pad), exactly lmpt's decoder_input_ids.
    return dict(input_ids=batch.input_ids, attention_mask=mask, labels=batch.labels)


def matmul_weights(module: nn.Module) -> int:
    """Weights of the matrix multiplies inside the blocks (Linear, and GPT-2's Conv1D)."""
    return sum(m.weight.numel() for m in module.modules() if type(m).__name__ in ("Linear", "Conv1D"))


def hf_flops_per_example(name: str, model: nn.Module, shape: dict[str, int], vocab: int, s: int, t: int) -> float:
    """6 N_mm + 12 L d S per token over the model as it runs; the tied head on every position (HF computes
    logits everywhere), counted once as a matmul even though its weight is the embedding."""
    d, layers = shape["d_model"], shape["n_layers"]
    head = 6.0 * d * vocab
    if name == "span":
        enc, dec = model.encoder, model.decoder
        cross_kv = sum(b.layer[1].EncDecAttention.k.weight.numel() * 2 for b in dec.block)
        n_enc, n_dec = matmul_weights(enc) + cross_kv, matmul_weights(dec) - cross_kv
        return s * (6.0 * n_enc + 12.0 * layers * d * s) + t * (6.0 * n_dec + 12.0 * layers * d * (t + s) + head)
    body = model.transformer.h if name == "clm" else model.bert.encoder
    n_mm = matmul_weights(body)
    if name == "mlm":
        n_mm += model.cls.predictions.transform.dense.weight.numel()
    return s * (6.0 * n_mm + 12.0 * layers * d * s + head)


def adamw(model: nn.Module, device: torch.device) -> torch.optim.Optimizer:
    """lmpt's optimizer builder (decay groups, fused on cpu/cuda) with the benchmark's settings."""
    cfg = OmegaConf.structured(AdamWConfig(lr=LR, betas=list(BETAS), eps=EPS, weight_decay=WEIGHT_DECAY))
    return build_optimizer(cfg, model, device)


def make_step(
    model: nn.Module, loss_of: Callable[[Batch], torch.Tensor], device: torch.device, dtype: torch.dtype | None
) -> Callable[[Batch], None]:
    """The plain PyTorch training step both systems run: forward + loss, backward, clip, AdamW."""
    optimizer = adamw(model, device)
    assert len(optimizer.param_groups) == len(parameter_groups(model, WEIGHT_DECAY))

    def step(batch: Batch) -> None:
        autocast = torch.autocast(device.type, dtype=dtype) if dtype is not None else contextlib.nullcontext()
        with autocast:
            loss = loss_of(batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def build_systems(
    name: str, wanted: list[str], shape: dict, objective: Objective, vocab: int, device: torch.device
) -> dict[str, Callable[[torch.dtype | None], System]]:
    """Factories (per precision) of the systems under test, keyed by label; each model is built once per
    objective from seed 0. lmpt compiles as `trainer.compile=true` does (`compile_parts`: the stack and the
    sparse head); the reference compiles whole, as a user of transformers would."""
    s, t = objective.seq_len, objective.target_length
    systems: dict[str, Callable[[torch.dtype | None], System]] = {}
    for label in wanted:
        system, compiled = label.removesuffix("-compiled"), label.endswith("-compiled")
        torch.manual_seed(0)
        if system == "lmpt":
            model = build_lmpt(shape, objective, vocab).to(device).train()
            if compiled:
                model.compile_parts()
            head_fraction = float(objective.cfg.mask_prob) if name == "mlm" else 1.0
            flops = model.flops_per_example(s, t, head_fraction)
            loss_of = functools.partial(lambda m, b: objective.loss(m(b), b)[0], model)
        elif system == "hf":
            model = build_hf(name, shape, objective, vocab).to(device).train()
            forward = torch.compile(model) if compiled else model
            flops = hf_flops_per_example(name, model, shape, vocab, s, t)
            pad = objective.special.pad
            loss_of = functools.partial(lambda f, pad, b: f(**hf_inputs(name, b, pad)).loss, forward, pad)
        else:
            raise SystemExit(f"bench: unknown system {label!r}; choose from lmpt, lmpt-compiled, hf, hf-compiled")
        systems[label] = functools.partial(make_system, system, compiled, model, loss_of, flops, device)
    return systems


def make_system(
    name: str,
    compiled: bool,
    model: nn.Module,
    loss_of: Callable[[Batch], torch.Tensor],
    flops: float,
    device: torch.device,
    dtype: torch.dtype | None,
) -> System:
    """One system at one precision, with an optimizer of its own."""
    return System(name, compiled, model, make_step(model, loss_of, device, dtype), flops)


# -- timing -------------------------------------------------------------------------------------------
def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_run(system: System, batches: list[Batch], warmup: int, steps: int, device: torch.device) -> float:
    """Seconds per step over `steps` steps after `warmup` untimed ones; batches cycle in a fixed order."""
    for i in range(warmup):
        system.step(batches[i % len(batches)])
    sync(device)
    start = time.perf_counter()
    for i in range(steps):
        system.step(batches[(warmup + i) % len(batches)])
    sync(device)
    return (time.perf_counter() - start) / steps


def peak_of(device: torch.device, dtype: torch.dtype) -> tuple[float, str]:
    """MFU denominator: the datasheet dense bf16 figure on a known GPU, else a matmul peak measured now
    (`measured_matmul_peak` is cached per process; on a shared CPU the peak must be taken beside the runs)."""
    if device.type == "cuda":
        gpu = torch.cuda.get_device_name(device)
        for key, flops in DATASHEET_BF16_PEAK.items():
            if key in gpu:
                return flops, f"{key} bf16 datasheet"
    measured_matmul_peak.cache_clear()
    return measured_matmul_peak(device.type, dtype), f"measured {str(dtype).removeprefix('torch.')} matmul"


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    model = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{model}, {torch.get_num_threads()} threads"


# -- main ---------------------------------------------------------------------------------------------
def bench_objective(name: str, args, shape: dict, data, device: torch.device, console: Console) -> list[dict]:
    seq_len = args.seq_len or shape["seq_len"]
    batch_size = args.batch or shape["batch"]
    vocab = max(shape["vocab"], data.tokenizer.vocab_size)
    objective = build_objective(OBJECTIVE_CONFIGS[name](), data.tokenizer, seq_len, "auto")
    sampler = WindowSampler(data.train, objective.window_length, StepLayout(batch_size), seed=0)
    batches = [b.to(device) for b in make_batches(objective, sampler, max(4, args.warmup + args.steps))]
    pad = objective.special.pad
    counts = [count_tokens(b, pad) for b in batches]
    tokens, loss_tokens = (sum(c[i] for c in counts) / len(counts) for i in (0, 1))
    data_s = data_path_seconds(objective, sampler)
    torch._dynamo.reset()  # each objective's models compile afresh, never against another's cache limit
    factories = build_systems(name, args.systems.split(","), shape, objective, vocab, device)
    records = []
    for precision in args.precisions.split(","):
        dtype = {"fp32": None, "bf16": torch.bfloat16}[precision]
        systems = {label: make(dtype) for label, make in factories.items()}
        peaks = []
        for repeat in range(args.repeats):
            peak, peak_source = peak_of(device, dtype or torch.float32)
            peaks.append(peak)
            for label, system in systems.items():  # A B A B ...: all see the same machine load
                system.runs.append(timed_run(system, batches, args.warmup, args.steps, device))
                console.log(f"{name} {precision} {label} run {repeat + 1}: {system.runs[-1] * 1e3:.0f} ms/step")
        peak = statistics.median(peaks)
        rows = {}
        for label, system in systems.items():
            step_s = statistics.median(system.runs)
            rows[label] = dict(
                system=system.name,
                compiled=system.compiled,
                objective=name,
                precision=precision,
                preset=args.preset,
                reference=REFERENCE[name] if system.name == "hf" else "lmpt",
                device=describe_device(device),
                batch=batch_size,
                seq_len=seq_len,
                target_len=objective.target_length,
                vocab=vocab,
                parameters=sum(p.numel() for p in system.model.parameters()),
                tokens_per_step=tokens,
                loss_tokens_per_step=loss_tokens,
                step_ms=step_s * 1e3,
                tokens_per_s=tokens / step_s,
                loss_tokens_per_s=loss_tokens / step_s,
                runs_tokens_per_s=[tokens / r for r in system.runs],
                mfu=system.flops_per_example * batch_size / step_s / peak,
                peak_flops=peak,
                peak_source=peak_source,
                data_path_ms=data_s * 1e3,
                data_path_share=data_s / (step_s + data_s),
            )
        runs = {label: system.runs for label, system in systems.items()}
        for label in rows:
            if label.startswith("lmpt"):
                add_ratios(rows[label], runs[label], rows, runs)
        records += rows.values()
    return records


def add_ratios(lm: dict, lm_runs: list[float], rows: dict[str, dict], runs: dict[str, list[float]]) -> None:
    """`ratio`: lmpt over the reference in a plain PyTorch loop (eager); `ratio_vs_compiled_hf`: over the
    compiled reference, when it ran. With each, the median of the ratios of adjacent runs, which share the
    machine's load and so resist drifts in it."""
    for key, hf in (("ratio", "hf"), ("ratio_vs_compiled_hf", "hf-compiled")):
        if hf in rows:
            lm[key] = lm["tokens_per_s"] / rows[hf]["tokens_per_s"]
            lm[f"{key}_of_adjacent_runs"] = statistics.median(h / m for m, h in zip(lm_runs, runs[hf], strict=True))


def render(records: list[dict], console: Console) -> None:
    table = Table(title="lmpt vs Hugging Face transformers: medians of alternating runs")
    for column in ("objective", "precision", "system", "params", "tokens/s", "loss tok/s", "ms/step", "MFU"):
        table.add_column(column, justify="right" if column not in ("objective", "system") else "left")
    table.add_column("vs HF eager", justify="right", style="bold")
    table.add_column("vs HF compiled", justify="right")
    table.add_column("data path", justify="right")

    def ratio(r: dict, key: str) -> str:
        return f"{r[key]:.2f}x (pairs {r[key + '_of_adjacent_runs']:.2f}x)" if key in r else ""

    for r in records:
        label = (r["system"] if r["system"] == "lmpt" else r["reference"]) + (" compiled" if r["compiled"] else "")
        table.add_row(
            r["objective"],
            r["precision"],
            label,
            f"{r['parameters'] / 1e6:.1f}M",
            f"{r['tokens_per_s']:,.0f}",
            f"{r['loss_tokens_per_s']:,.0f}",
            f"{r['step_ms']:.0f}",
            f"{r['mfu']:.1%}",
            ratio(r, "ratio"),
            ratio(r, "ratio_vs_compiled_hf"),
            f"{r['data_path_share']:.1%}" if r["system"] == "lmpt" else "",
        )
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console(stderr=True)
    device = torch.device(args.device)
    shape = PRESETS[args.preset]
    with tempfile.TemporaryDirectory(prefix="lmpt-bench-") as tmp:
        cache_root = Path(args.cache_dir).expanduser() if args.cache_dir else Path(tmp)
        data_cfg = DataConfig(paths=["bundled:tinyshakespeare.txt"], seq_len=args.seq_len or shape["seq_len"])
        data = prepare_corpora(data_cfg, TokenizerConfig(vocab_size=TOKENIZER_VOCAB), Path.cwd(), cache_root)
        console.log(f"device: {describe_device(device)}; torch {torch.__version__}; preset {args.preset}")
        records = []
        for name in args.objectives.split(","):
            records += bench_objective(name, args, shape, data, device, console)
    render(records, Console(width=max(160, Console().width)))
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
