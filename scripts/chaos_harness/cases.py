"""The configurations the chaos harness kills: each objective, a mixture, a continued stage and DDP, all tiny so
that one kill-and-resume cycle costs a few seconds on a CPU."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from lmpt.objectives.registry import OBJECTIVES as registered_objectives

MAX_STEPS, CKPT_EVERY, EVAL_EVERY = 40, 5, 10

BASE = [
    "model=tiny",
    "tokenizer.vocab_size=512",
    "data.seq_len=32",
    "trainer.batch_size=4",
    f"trainer.max_steps={MAX_STEPS}",
    f"trainer.ckpt_every={CKPT_EVERY}",
    f"trainer.eval_every={EVAL_EVERY}",
    "trainer.eval_batches=8",
    "trainer.log_every=1",
    "trainer.keep_last=2",
    "trainer.sample_tokens=0",
    "trainer.progress=plain",
    "trainer.device=cpu",
    "trainer.precision=fp32",
]
"""40 steps of a 0.9M-parameter model in fp32: a checkpoint every 5 steps, an evaluation of 8 batches every 10."""


@dataclass(frozen=True)
class Case:
    """One configuration: `lmpt` overrides, run by `processes` ranks (torchrun when more than one)."""

    name: str
    overrides: list[str]
    processes: int = 1
    weight: float = 1.0
    """Its share of the kills (a DDP cycle costs about twice a single-process one)."""
    init_from: str | None = None
    """The case whose finished uninterrupted run this stage starts from (model.init_from)."""

    def args(self, source: Path | None = None) -> list[str]:
        """The overrides of this case; `source`: the run directory model.init_from names."""
        stage = [f"model.init_from={source}"] if self.init_from else []
        return [*BASE, *self.overrides, *stage]

    def command(self, args: list[str]) -> list[str]:
        """`python -m lmpt ARGS`, or the same under torchrun with this case's number of processes."""
        if self.processes == 1:
            return [sys.executable, "-m", "lmpt", *args]
        return [
            *(sys.executable, "-m", "torch.distributed.run", "--standalone"),
            f"--nproc_per_node={self.processes}",
            *("-m", "lmpt", *args),
        ]


OBJECTIVES = tuple(registered_objectives)
"""Every objective lmpt trains, as its registry finds them: a new objective gets a chaos case by itself."""

CASES = {
    **{name: Case(name, [f"objective={name}"]) for name in OBJECTIVES},
    "mixture": Case("mixture", ["objective=clm", "data=mixture"]),
    "init_from": Case("init_from", ["objective=clm", "data=wikitext"], init_from="clm"),
    "ddp": Case("ddp", ["objective=clm", "trainer.strategy=ddp"], processes=2, weight=0.6),
}
"""Every case `--cases` may name, in the order they run (a stage after the run it continues)."""


def split_kills(total: int, cases: list[Case]) -> dict[str, int]:
    """`total` kills shared out by weight (largest remainders), at least one per case."""
    weights = sum(c.weight for c in cases)
    shares = {c.name: total * c.weight / weights for c in cases}
    kills = {name: max(1, int(share)) for name, share in shares.items()}
    for name in sorted(shares, key=lambda n: shares[n] - int(shares[n]), reverse=True):
        if sum(kills.values()) >= total:
            break
        kills[name] += 1
    return kills
