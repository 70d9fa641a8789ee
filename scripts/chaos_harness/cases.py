"""The configurations the chaos harness kills: each objective, a mixture, a continued stage and DDP, all tiny so
that one kill-and-resume cycle costs a few seconds on a CPU. Each scores two small downstream tasks when training
ends (a zero-shot cloze and a word-order probe, both beside their untrained control), so kills land in scoring too."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from lmpt.downstream.bundled import tasks_dir
from lmpt.objectives.registry import OBJECTIVES as registered_objectives
from lmpt.objectives.registry import objective_class

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

    def args(self, work: Path, source: Path | None = None) -> list[str]:
        """The overrides of this case, its downstream tasks written under `work`; `source`: the run directory
        model.init_from names."""
        stage = [f"model.init_from={source}"] if self.init_from else []
        return [*BASE, *self.overrides, *stage, *downstream_args(work, self.objective)]

    @property
    def objective(self) -> str:
        return next(o.split("=", 1)[1] for o in self.overrides if o.startswith("objective="))

    def command(self, args: list[str]) -> list[str]:
        """`python -m lmpt ARGS`, or the same under torchrun with this case's number of processes."""
        if self.processes == 1:
            return [sys.executable, "-m", "lmpt", *args]
        return [
            *(sys.executable, "-m", "torch.distributed.run", "--standalone"),
            f"--nproc_per_node={self.processes}",
            *("-m", "lmpt", *args),
        ]


SCORING_ITEMS = {"cloze": 24, "train": 80, "dev": 24}
"""Items of the downstream tasks each run scores when training ends: the first of the bundled shakespeare-cloze and
shakespeare-order (a second or two of scoring, the control's included)."""
DOWNSTREAM = ["downstream.seeds=2", "downstream.epochs=1", "downstream.batch_size=4"]


def downstream_args(work: Path, objective: str) -> list[str]:
    """The downstream overrides of a case training `objective`: the two tasks (written under `work/tasks` once); an
    objective whose model keeps no token head (electra) has no zero-shot task, as lmpt refuses it one."""
    folder = work / "tasks"
    cloze, order = folder / "cloze.jsonl", folder / "order"
    if not (order / "dev.jsonl").exists():
        order.mkdir(parents=True, exist_ok=True)
        shipped = tasks_dir()
        lines = (shipped / "shakespeare-cloze.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
        cloze.write_text("".join(lines[: SCORING_ITEMS["cloze"]]), encoding="utf-8")
        for split in ("train", "dev"):
            rows = (shipped / "shakespeare-order" / f"{split}.jsonl").read_text(encoding="utf-8").splitlines(True)
            (order / f"{split}.jsonl").write_text("".join(rows[: SCORING_ITEMS[split]]), encoding="utf-8")
    cls = objective_class(objective)
    choice = [] if cls is None or cls.token_head_missing else [f"downstream.choice_tasks=[{cloze}]"]
    return [*choice, f"downstream.classification_tasks=[{order}]", *DOWNSTREAM]


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
