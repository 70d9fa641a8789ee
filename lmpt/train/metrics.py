"""Training metrics: sums kept on the device between logs, and the run's append-only metrics.jsonl."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path

import torch

from lmpt.batch import IGNORE, Batch
from lmpt.console import console
from lmpt.errors import LmptError
from lmpt.objectives.base import Stats
from lmpt.objectives.measure import Measure
from lmpt.objectives.yardstick import perplexity as perplexity  # the one definition, re-exported to train/


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
    byte length (lmpt.tokenizer.base.piece_bytes: reserved tokens such as eos spell none). Read from the batches on
    the host, once a run."""
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
