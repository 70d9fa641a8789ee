"""The crossover grid: each scale's keys and setting, the paper's recipe as lmpt keys, and the runs the command's keys
plan, done the paper's way:
- compute-optimal sizes: every budget (D = U x epochs training tokens) trains the ladder's model nearest its
  compute-optimal size (D / 20 parameters, lmpt.reproduce.ladder) and the rung either side of it, so that the frontier
  runs over sizes and each budget's compute-optimal model is on it;
- the paper's recipe for both objectives (the paper and its repository's training scripts): AdamW, weight decay 0.1,
  dropout 0.1, cosine decay to 10% of the peak learning rate after a 1% warm-up (`RECIPE`);
- compute counted as the paper counts it, 6 N D with N the parameters with the embedding; lmpt's own count (the
  attention and the head's share of positions too) is stated beside it and never compared with the law.

A run is planned when its 6 N D is at most CAP_FACTOR times the law's C_crit(U): the grid reaches past the crossing the
paper predicts. A grid that cannot place the crossing where the law puts it is refused in one line."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from lmpt.errors import LmptError
from lmpt.reproduce.crossover.frontier import law
from lmpt.reproduce.ladder import Shape, check_ladder, optimal_parameters, training_flops
from lmpt.reproduce.reproduction import AR, DIFFUSION, PlannedRun, Reproduction, Scale, corpus_keys, numbers

OBJECTIVES = (AR, DIFFUSION)
CAP_FACTOR = 8.0
"""A run is planned when its 6 N D is at most this times the law's C_crit(U)."""
NEIGHBOURS = 1
"""Rungs of the ladder either side of each budget's compute-optimal one that it trains too."""
MAX_UNIQUE = 1e13
"""More unique tokens than this (ten trillion, past any corpus) are refused."""
MAX_WIDTH = 65_536
"""A wider ladder rung (about 10^14 parameters in this shape) is refused."""
LADDER = (16, 32, 64, 128)
"""scale=laptop's model widths: about 0.04M, 0.08M, 0.24M (micro) and 1.1M parameters at a 2,048-piece vocabulary."""
RECIPE = {
    "optimizer": "adamw",
    "optimizer.weight_decay": "0.1",
    "model.dropout": "0.1",
    "scheduler": "cosine",
    "scheduler.min_lr_ratio": "0.1",
}
"""The paper's recipe as lmpt keys, for both objectives (AdamW's betas (0.9, 0.95) and gradient clipping at 1.0 are
lmpt's defaults); the warm-up, 1% of the steps, is each run's own key (`WARMUP_SHARE`)."""
WARMUP_SHARE = 0.01
COMMON = ("trainer.eval_every=0", "trainer.sample_tokens=0")


@dataclass(frozen=True)
class Setting:
    """What a scale fixes beside its grid keys: the tokenizer, the context and batch, the peak learning rate and the
    precision."""

    vocab: int
    seq_len: int
    batch: int
    accum: int
    lr: float
    """The peak learning rate of both objectives (the paper's 2e-4 is for its batch of 256 x 2,048 tokens)."""
    tokenizer: str
    precision: str

    @property
    def tokens_per_step(self) -> int:
        return self.seq_len * self.batch * self.accum

    def keys(self) -> tuple[str, ...]:
        return (
            f"tokenizer={self.tokenizer}",
            f"tokenizer.vocab_size={self.vocab}",
            f"data.seq_len={self.seq_len}",
            f"trainer.batch_size={self.batch}",
            f"trainer.grad_accum={self.accum}",
            f"trainer.precision={self.precision}",
            f"optimizer.lr={self.lr:g}",
        )


SETTINGS = {
    Scale.laptop: Setting(2048, 128, 16, 1, 3e-3, "sentencepiece", "fp32"),
    Scale.paper: Setting(50257, 2048, 32, 8, 2e-4, "bytelevel", "bf16"),
}
"""laptop: lmpt's default context and batch, fp32 (bf16 does not pay on a CPU at these widths), one peak learning rate
for both objectives as the paper's, 3e-3: with this recipe at widths 16 and 64 (40,000 unique tokens, 16 epochs), it
was the best or within 0.01 bits of the best of 1e-3, 3e-3 and 1e-2 for clm and mdlm but one (width 16 clm, 0.28 bits
behind 1e-2), where 1e-3 left width 16 1.1 bits behind; paper: the paper's 2,048-token context, 256 sequences a step
(32 x 8 accumulated), a GPT-2-style byte-level BPE of GPT-2's size, bf16 and the paper's learning rate."""


class CrossoverGrid(Reproduction):
    """The grid the command's keys choose (corpus, ladder, unique_tokens, epochs; `scales` gives their defaults) and
    the runs it plans; the reproduction (lmpt.reproduce.crossover.reproduction) adds what they show."""

    grid_keys: ClassVar[tuple[str, ...]] = ("corpus", "ladder", "unique_tokens", "epochs")
    scales: ClassVar[dict[Scale, dict[str, Any]]] = {
        Scale.laptop: {
            "corpus": ["wikitext"],
            "ladder": [str(w) for w in LADDER],
            "unique_tokens": ["10000", "20000", "40000"],
            "epochs": ["1", "4", "16", "32", "64", "128", "256"],
            "seeds": 3,
        },
        Scale.paper: {
            "corpus": ["wikitext"],
            "ladder": ["128", "256", "384", "512", "640", "768", "1024", "1280", "1536", "1792"],
            "unique_tokens": ["25000000"],
            "epochs": ["4", "8", "16", "32", "64", "128", "256"],
            "seeds": 3,
        },
    }

    def __init__(self, scale: Scale = Scale.laptop, seeds: int | None = None, **given: list[str]) -> None:
        super().__init__(scale, seeds, **given)
        self.setting = SETTINGS[scale]
        corpora = self.grid["corpus"]
        if len(corpora) != 1:
            raise LmptError(f"corpus=[{','.join(corpora)}] names {len(corpora)} texts: {self.name} takes one")
        self.corpus = corpora[0]
        self.data_keys = corpus_keys(self.corpus)
        least = self.setting.seq_len + 1
        self.unique = sorted(set(numbers(self, "unique_tokens", int, least)))
        self.epochs = sorted(set(numbers(self, "epochs", float, 1)))
        widths = sorted(set(numbers(self, "ladder", int, 1)))
        if self.unique[-1] > MAX_UNIQUE:
            raise LmptError(
                f"unique_tokens={self.unique[-1]:.3g} is more text than any corpus: give at most {MAX_UNIQUE:.0e}"
            )
        if widths[-1] > MAX_WIDTH:
            raise LmptError(
                f"ladder width {widths[-1]:.3g} is past any model lmpt trains: give widths up to {MAX_WIDTH:,}"
            )
        self.ladder = check_ladder(widths, self.setting.vocab, self.setting.seq_len)
        self._check_grid()

    def _check_grid(self) -> None:
        """Refuse, in one line, a grid that cannot place the crossing where the law puts it at some U: no run under
        the cap, a largest run short of C_crit(U), or a cheapest run already past it."""
        planned = self.runs()
        for unique in self.unique:
            flops = [r.paper_flops for r in planned if r.labels["unique"] == unique]
            where = f"at unique_tokens={unique} (the law's C_crit: {law(unique):.2e} FLOPs, 6ND)"
            if not flops:
                raise LmptError(
                    f"the grid has no run {where}: every model and epoch count is above {CAP_FACTOR:g}x C_crit; give "
                    "more unique tokens, fewer epochs or narrower models"
                )
            if max(flops) < law(unique):
                raise LmptError(
                    f"the grid cannot reach the law's crossing {where}: its largest run is "
                    f"{max(flops) / law(unique):.2g}x C_crit; give more epochs or wider models"
                )
            if min(flops) > law(unique):
                raise LmptError(
                    f"the grid starts past the law's crossing {where}: its cheapest run is "
                    f"{min(flops) / law(unique):.2g}x C_crit; give fewer epochs or narrower models"
                )

    def budget_shapes(self, unique: int, epochs: float) -> list[Shape]:
        """The rungs a budget of unique x epochs tokens trains: the one nearest its compute-optimal size (in log) and
        NEIGHBOURS either side."""
        best = optimal_parameters(unique * epochs)
        nearest = min(range(len(self.ladder)), key=lambda i: abs(math.log(self.ladder[i].parameters) - math.log(best)))
        return self.ladder[max(0, nearest - NEIGHBOURS) : nearest + NEIGHBOURS + 1]

    def runs(self) -> list[PlannedRun]:
        planned = []
        for seed in range(self.seeds):
            for unique in self.unique:
                for epochs in self.epochs:
                    steps = unique * epochs / self.setting.tokens_per_step
                    if not math.isfinite(steps):  # past any cap: never rounded
                        continue
                    for shape in self.budget_shapes(unique, epochs):
                        run = self._planned(AR, shape, unique, epochs, seed, max(1, round(steps)))
                        if run.paper_flops <= CAP_FACTOR * law(unique):
                            planned += [run, self._planned(DIFFUSION, shape, unique, epochs, seed, run.labels["steps"])]
        return planned

    def _planned(self, objective: str, shape: Shape, unique: int, epochs: float, seed: int, steps: int) -> PlannedRun:
        setting = self.setting
        tokens = steps * setting.tokens_per_step
        return PlannedRun(
            f"u{unique}-w{shape.width}-{epochs:g}x-{objective}-seed{seed}",
            (
                f"objective={objective}",
                *self.data_keys,
                *setting.keys(),
                *shape.keys(),
                *(f"{key}={value}" for key, value in RECIPE.items()),
                f"scheduler.warmup_steps={max(1, round(WARMUP_SHARE * steps))}",
                f"data.unique_tokens={unique}",
                f"trainer.max_steps={steps}",
                f"trainer.seed={seed}",
                *COMMON,
            ),
            {
                "objective": objective,
                "model": shape.label,
                "width": shape.width,
                "parameters": shape.parameters,
                "unique": unique,
                "epochs": epochs,
                "steps": steps,
                "tokens": tokens,
                "seed": seed,
            },
            training_flops(shape, objective) * tokens,
            6.0 * shape.parameters * tokens,
        )
