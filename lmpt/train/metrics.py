"""What a run measures of itself and where it writes it: the objective's statistics (sums kept on the device between
logs), the work spent (tokens, loss-bearing tokens, FLOPs and training seconds, summed over processes and launches:
curves are drawn against them, budgets are measured in them), how much of the hardware it uses (MFU, memory), and
the sinks: the run's append-only metrics.jsonl, and TensorBoard and Weights & Biases on a switch each.

TensorBoard and W&B are never needed to run lmpt. Both survive a resume with every step once: a resumed run logs
again the steps after its checkpoint, so TensorBoard purges its own events from that step on, and W&B (the run id
lives in the checkpoint) keeps the steps it already holds, which the resumed run repeats bit for bit."""

from __future__ import annotations

import functools
import json
import math
import os
import resource
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from lmpt.batch import IGNORE, Batch
from lmpt.config.schema import TrainerConfig
from lmpt.console import console, info
from lmpt.errors import LmptError
from lmpt.objectives.base import Stats
from lmpt.objectives.measure import Measure
from lmpt.objectives.yardstick import perplexity as perplexity  # the one definition, re-exported to train/
from lmpt.train.distributed import Distributed
from lmpt.train.matmul_peak import PEAKS, matmul_peak


class RunningStats:
    """Adds up (sum, count) pairs over micro-steps and steps without a device sync; read at log time."""

    def __init__(self) -> None:
        self.totals: dict[str, list[torch.Tensor]] = {}

    def add(self, stats: Stats) -> None:
        for name, (total, count) in stats.items():
            if name in self.totals:
                self.totals[name][0] += total.detach().float()
                self.totals[name][1] += count
            else:
                self.totals[name] = [total.detach().float().clone(), torch.as_tensor(count).clone()]

    def sum_over(self, ctx) -> None:
        """Add up every rank's sums and counts in place (a no-op in one process). Ranks may have seen
        different metrics (a denoiser absent from one rank's batch), so they first agree on the names."""
        if not ctx.enabled:
            return
        names = sorted(set().union(*ctx.all_gather_object(sorted(self.totals))))
        device = next(iter(self.totals.values()))[0].device if self.totals else None
        for name in names:
            if name not in self.totals:
                self.totals[name] = [torch.zeros((), device=device), torch.zeros((), dtype=torch.long, device=device)]
        for name in names:  # the same order on every rank
            for tensor in self.totals[name]:
                ctx.sum_(tensor)

    def merge(self, other: RunningStats) -> None:
        self.add({name: (total, count) for name, (total, count) in other.totals.items()})

    def means(self) -> dict[str, float]:
        return {name: (s / c.clamp(min=1)).item() for name, (s, c) in self.totals.items()}

    def count(self, name: str) -> int:
        return int(self.totals[name][1].item()) if name in self.totals else 0

    def reset(self) -> None:
        self.totals.clear()

    def state_dict(self) -> dict:
        return {name: [s.cpu(), c.cpu()] for name, (s, c) in self.totals.items()}

    def load_state_dict(self, state: dict, device: torch.device) -> None:
        self.totals = {name: [s.to(device), c.to(device)] for name, (s, c) in state.items()}


def bits_per_byte(nats: float, n_bytes: int) -> float:
    """Bits per UTF-8 byte of text whose scored tokens cost `nats` in all and spell `n_bytes` bytes: nats / (ln 2 x
    bytes), a measure no tokenizer biases (NaN without a byte). A run's validation, lmpt-eval and
    scripts/time_to_quality.py all compute it here."""
    return nats / (math.log(2) * n_bytes) if n_bytes > 0 else math.nan


def held_out_sizes(
    batches: dict[str, list[Batch]], piece_sizes: torch.Tensor, scored: Callable[[Batch], torch.Tensor] | None = None
) -> dict[str, tuple[int, int]]:
    """(scored tokens, the UTF-8 bytes they spell) of each source's held-out batches: the ids `scored` picks (the
    objective's Objective.scored_tokens: by default the positions that carry loss), each counted at its piece's
    byte length (lmpt.tokenizer.base.Tokenizer.piece_bytes: reserved tokens such as eos spell none). Read from the
    batches on the host, once a run."""
    sizes = {}
    for name, source_batches in batches.items():
        targets = [(b.labels[b.labels != IGNORE] if scored is None else scored(b)).cpu() for b in source_batches]
        sizes[name] = (sum(t.numel() for t in targets), sum(int(piece_sizes[t].sum()) for t in targets))
    return sizes


def with_bits_per_byte(record: dict, sizes: dict[str, tuple[int, int]], measure: Measure) -> dict:
    """An evaluation `record` (lmpt.train.evaluation) with val_bpb, the bits per byte of the held-out windows: the
    measure's nats per scored token (Measure.held_out_nats: the objective's token loss, or a bound's yardstick) x
    their scored tokens / (ln 2 x their bytes), over every source and, when the run mixes several, per source
    (val_bpb/NAME: the token loss). None where the measure has no figure this evaluation (a bound between its
    yardsticks)."""
    out = dict(record)
    tokens, n_bytes = (sum(size[i] for size in sizes.values()) for i in (0, 1))
    nats = measure.held_out_nats(record)
    if nats is not None:
        out["val_bpb"] = bits_per_byte(nats * tokens, n_bytes)
    loss_name = measure.objective.perplexity_of
    for name, (source_tokens, source_bytes) in sizes.items():
        if name and f"val_{loss_name}/{name}" in record:
            out[f"val_bpb/{name}"] = bits_per_byte(record[f"val_{loss_name}/{name}"] * source_tokens, source_bytes)
    return out


def strict_json(record: dict) -> str:
    """`record` as strict JSON: a non-finite float (a skipped step's gradient norm, an infinite perplexity)
    becomes null, never the bare NaN / Infinity that other JSON readers reject."""
    clean = {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in record.items()}
    return json.dumps(clean, allow_nan=False)


def _record(line: str) -> dict | None:
    """The lmpt record on `line` (an object with an integer step), or None."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) and isinstance(record.get("step"), int) else None


def _torn(line: str) -> bool:
    """What a write cut short leaves as the last line: the start of a record, or a zero-filled block."""
    rest = line.strip("\x00")
    return rest == "" or rest.startswith('{"step"')


class MetricsLog:
    """`metrics.jsonl`: one strict-JSON object per logged step or evaluation, floats at full precision."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _read(self) -> tuple[list[str], bool]:
        """(the file's records as text, whether a torn last record was left out). A power cut mid-write
        leaves such a record; anything else that is not an lmpt record makes the file foreign, refused."""
        if not self.path.exists():
            return [], False
        lines = self.path.read_text(encoding="utf-8", errors="replace").split("\n")
        tail = lines.pop()  # "" when the file ends with a newline, as every whole record does
        if tail and (_record(tail) is not None or not _torn(tail)):
            lines.append(tail)  # a whole record short of its newline is kept; anything else is judged below
        for number, line in enumerate(lines, 1):
            if line and _record(line) is None:
                raise LmptError(
                    f"{self.path} line {number} is not a metrics record lmpt wrote ({line[:40]!r}): it is not this "
                    "run's; move it away or pick another hydra.run.dir"
                )
        return [line for line in lines if line], bool(tail) and lines[-1:] != [tail]

    def repair(self) -> None:
        """Before a run (re)starts: drop a torn last record with a warning; refuse a foreign file."""
        kept, torn = self._read()
        if torn:
            console.print(f"[bold yellow]WARNING[/] {self.path}: dropped a torn last record (a write cut short)")
            self._replace(kept)

    def truncate_after(self, step: int) -> None:
        """Drop records after `step` (written by a run that died before its next checkpoint), atomically."""
        if self.path.exists():
            self._replace([line for line in self._read()[0] if json.loads(line)["step"] <= step])

    def drop(self, unwanted: Callable[[dict], bool]) -> None:
        """Drop the records `unwanted` picks, atomically; the file is rewritten only when it holds one."""
        lines = self._read()[0]
        kept = [line for line in lines if not unwanted(json.loads(line))]
        if len(kept) < len(lines):
            self._replace(kept)

    def _replace(self, lines: list[str]) -> None:
        tmp = self.path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(line + "\n" for line in lines))
        os.replace(tmp, self.path)

    def write(self, record: dict) -> None:
        with open(self.path, "a") as f:
            f.write(strict_json(record) + "\n")

    def records(self) -> list[dict]:
        return [json.loads(line) for line in self._read()[0]]


def _numbers(record: dict) -> dict[str, float]:
    return {k: float(v) for k, v in record.items() if k != "step" and isinstance(v, (int, float)) and math.isfinite(v)}


class TensorBoardSink:
    def __init__(self, run_dir: Path, first_step: int) -> None:
        """`first_step`: the first step this launch logs; events of an earlier launch from it on are purged."""
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:
            raise LmptError("trainer.tensorboard=true needs TensorBoard: pip install tensorboard") from exc
        self.writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"), purge_step=first_step)

    def write(self, record: dict) -> None:
        for key, value in _numbers(record).items():
            self.writer.add_scalar(key, value, record["step"])
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbSink:
    def __init__(self, project: str, record: dict, run_dir: Path, run_id: str) -> None:
        """`record`: the run's whole config as plain data (W&B shows it beside the run)."""
        try:
            import wandb
        except ImportError as exc:
            raise LmptError("trainer.wandb=true needs Weights & Biases: pip install wandb") from exc
        self.wandb = wandb
        self.run = wandb.init(
            project=project,
            id=run_id,
            resume="allow",
            dir=str(run_dir),
            name=run_dir.name,
            config=record,
        )
        # W&B ignores a step below its run's step counter; the steps it holds already are the ones this launch
        # repeats (bit for bit), so they are left as they are and logging goes on from the first one it lacks
        self.held_below = int(getattr(self.run, "step", 0) or 0)

    def write(self, record: dict) -> None:
        if record["step"] >= self.held_below:
            self.run.log(_numbers(record), step=record["step"])

    def close(self) -> None:
        self.run.finish()


def new_wandb_id() -> str:
    return uuid.uuid4().hex[:16]


def open_sinks(trainer: TrainerConfig, record: dict, run_dir: Path, wandb_id: str, start_step: int) -> list:
    """The extra sinks `trainer` asks for (rank 0 only); `record`: the run's config as plain data; `start_step`: the
    step this launch starts from (the checkpoint's, 0 for a new run)."""
    sinks: list = []
    if trainer.tensorboard:
        sinks.append(TensorBoardSink(run_dir, first_step=start_step + 1))
    if trainer.wandb:
        sinks.append(WandbSink(trainer.wandb_project, record, run_dir, wandb_id))
    return sinks


@dataclass
class Work:
    """Cumulative work of a run over every process and every launch (carried in the checkpoint)."""

    tokens: int = 0
    """Non-padding input tokens (encoder and decoder inputs)."""
    loss_tokens: int = 0
    """Tokens that carried loss."""
    flops: float = 0.0
    """Training FLOPs by the model's own count (lmpt.train.metrics.training_flops)."""
    seconds: float = 0.0
    """Wall-clock seconds of training steps, waiting for data included (evaluation and checkpoints not)."""

    def state_dict(self) -> dict:
        return asdict(self)

    def load_state_dict(self, state: dict) -> None:
        for key, value in state.items():
            setattr(self, key, value)

    def spent(self, unit: str) -> float:
        """The amount spent in a budget's unit: tokens, flops or minutes."""
        return {"tokens": self.tokens, "flops": self.flops, "minutes": self.seconds / 60}[unit]

    def record(self) -> dict:
        """The cumulative counts every metrics.jsonl record carries (the x axes of curves against compute)."""
        return {"tokens": self.tokens, "loss_tokens": self.loss_tokens, "flops": self.flops}


def count_tokens(batch: Batch, pad_id: int) -> int:
    """Non-padding input tokens (encoder and decoder inputs) of a batch still on the CPU: no device sync."""
    total = int((batch.input_ids != pad_id).sum())
    if batch.decoder_input_ids is not None:
        total += int((batch.decoder_input_ids != pad_id).sum())
    return total


def add_step(work: Work, micro_batches: list[Batch], model, objective, examples: int, ctx: Distributed) -> None:
    """Add one optimizer step of `examples` examples over all processes to `work`, counted on this process's
    CPU batches (one small all-reduce per step under torchrun)."""
    counts = [
        sum(count_tokens(b, objective.special.pad) for b in micro_batches),
        sum(b.loss_tokens for b in micro_batches),
    ]
    if ctx.enabled:
        device = next(model.parameters()).device
        counts = [int(c) for c in ctx.sum_(torch.tensor(counts, device=device)).tolist()]
    tokens, loss_tokens = counts
    work.tokens += tokens
    work.loss_tokens += loss_tokens
    work.flops += training_flops(model, examples, loss_tokens, objective.seq_len, objective.target_length)


ASSUMED_MFU = 0.4
"""Utilisation assumed for time estimates before a run has measured its own."""

DATASHEET_BF16_PEAK = {"H100": 989e12, "H200": 989e12, "A100": 312e12}
"""Dense bf16 FLOP/s (never the 2:4-sparse figure), by GPU name."""


BUSY: dict[tuple[str, torch.dtype], str] = {}
"""Why each measured peak's machine was busy, by (device type, dtype): said once a run trains (say_if_busy), never
while a command only plans or refuses."""


@functools.cache
def measured_matmul_peak(device_type: str, dtype: torch.dtype) -> float:
    """FLOP/s of a large square matmul in the run's dtype, the best this machine has shown (lmpt.train.matmul_peak:
    the best of several timings, cached per machine): the CPU has no datasheet figure to trust. Notes in BUSY when
    the machine is busy, as the run's throughput and MFU then read low."""
    peak = matmul_peak(device_type, dtype, PEAKS.path())
    if peak.busy:
        BUSY[(device_type, dtype)] = peak.busy
    return peak.flops


def say_if_busy(device: torch.device, dtype: torch.dtype) -> None:
    """Once per process, when the run's peak was measured on a busy machine: its throughput and MFU read low through
    no fault of its own."""
    busy = BUSY.pop((device.type, dtype), None)
    if busy:
        info(f"[yellow]machine busy: {busy}; throughput and MFU are low[/]")


def peak_flops(device: torch.device, dtype: torch.dtype) -> tuple[float, str]:
    """The denominator of MFU and where it came from."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        for key, flops in DATASHEET_BF16_PEAK.items():
            if key in name:
                return flops, f"{key} bf16 datasheet"
    return measured_matmul_peak(device.type, dtype), f"best {dtype} matmul measured on this {device.type}"


def peak_memory_mb(device: torch.device) -> float:
    """Peak allocated accelerator memory, or the process's peak resident memory on a CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


@dataclass(frozen=True)
class StepCost:
    """The expected cost of one optimizer step (all processes), from which a budget's step count is derived."""

    tokens: float
    flops: float
    seconds: float

    def of(self, unit: str) -> float:
        return {"tokens": self.tokens, "flops": self.flops, "minutes": self.seconds / 60}[unit]


def training_flops(model, examples: int, loss_tokens: float, seq_len: int, target_len: int = 0) -> float:
    """Training FLOPs of `examples` examples whose output head ran on `loss_tokens` positions, by the model's own
    count (`flops_per_example`): the one FLOP figure behind MFU, budgets, metrics.jsonl and the dry-run plan."""
    positions = examples * (target_len or seq_len)
    return examples * model.flops_per_example(seq_len, target_len, min(1.0, loss_tokens / max(1, positions)))


def expected_step_cost(model, objective, examples: int, peak: float) -> StepCost:
    """Tokens, FLOPs and seconds (at ASSUMED_MFU of `peak`) one optimizer step of `examples` examples is expected
    to cost, the head counted on the objective's expected loss-bearing share of positions."""
    seq_len, target_len = objective.seq_len, objective.target_length
    loss_tokens = examples * (target_len or seq_len) * objective.expected_loss_fraction
    flops = training_flops(model, examples, loss_tokens, seq_len, target_len)
    return StepCost(tokens=examples * (seq_len + target_len), flops=flops, seconds=flops / (peak * ASSUMED_MFU))
