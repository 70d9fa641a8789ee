"""The fim grid: corpora whose documents differ in length by orders of magnitude (the scale's, or any `corpus=` lmpt
reads), a ladder of model widths (lmpt.reproduce.ladder, micro and tiny by name), token budgets, seeds; in each cell
the same decoder trained as clm and as fim (fim_rate 0.5, spm_rate 0.5) on the same batches of tokens, step for step,
each run scoring Zorro beside its untrained control when it ends. A corpus the largest budget would read more than
MAX_EPOCHS times is refused before any run starts."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, ClassVar

from lmpt.config.schema import TokenizerConfig
from lmpt.errors import LmptError
from lmpt.objectives.fim import FimConfig
from lmpt.reproduce.figures import count_text
from lmpt.reproduce.grid import prepare_corpus
from lmpt.reproduce.ladder import Shape, check_ladder
from lmpt.reproduce.reproduction import AR, CONF_DATA, PlannedRun, Reproduction, Scale, corpus_keys, numbers

FIM50 = "fim"
"""The two arms, as the runs' names and the tables call them: the paper's autoregressive control (fim at fim_rate 0,
clm batch for batch) and its FIM-50% models."""
ARMS = {AR: ("objective=fim", "objective.fim_rate=0.0"), FIM50: ("objective=fim",)}
FIM_RATE, SPM_RATE = FimConfig.fim_rate, FimConfig.spm_rate
"""The FIM arm's rates: the objective's defaults, the paper's FIM-50% with PSM and SPM both trained."""
NAMED_WIDTHS = {"micro": 64, "tiny": 128}
"""Model groups the ladder also takes by name: their shapes are the ladder's at these widths."""
MIN_STEPS = 20
"""The fewest optimizer steps a budget may buy."""
MAX_EPOCHS = 4.0
"""Passes over a corpus a budget may take: past about 4, repeated text is no longer nearly as good as new
(Muennighoff et al. 2023); the paper's runs read their 100B tokens about once."""
PAPER_CONTEXT = 2048
"""The paper's context."""
ZORRO = "zorro-fast"
"""The grammar each run scores beside its untrained control (a bundled task)."""


def corpus_label(corpus: str) -> str:
    """A corpus's name in run names and tables: a data group's own name, a path's file or folder name."""
    if (CONF_DATA / f"{corpus}.yaml").is_file():
        return corpus
    stem = Path(corpus.rstrip("/*")).stem or "text"
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", stem)


def model_label(shape: Shape) -> str:
    """A ladder rung's name: micro or tiny where it is that model group's shape, else wWIDTH."""
    names = {width: name for name, width in NAMED_WIDTHS.items()}
    return names.get(shape.width, shape.label)


def cell_name(shape: Shape, tokens: int) -> str:
    """A (model, budget) cell's name in claims and tables: 'micro, 300k tokens'."""
    return f"{model_label(shape)}, {count_text(tokens)} tokens"


class FimGrid(Reproduction):
    """The grid the command's keys choose (corpus, ladder, budgets; `scales` gives their defaults) and the runs it
    plans; the reproduction (lmpt.reproduce.fim.reproduction) adds what they show."""

    grid_keys: ClassVar[tuple[str, ...]] = ("corpus", "ladder", "budgets")
    scales: ClassVar[dict[Scale, dict[str, Any]]] = {
        Scale.laptop: {
            "corpus": ["shakespeare", "tinystories", "wikitext"],
            "ladder": ["micro", "tiny"],
            "budgets": ["300000", "1000000"],
            "seeds": 3,
            "seq_len": 512,
            "batch_size": 4,
            "eval_batches": 8,
            "keys": [],
        },
        Scale.paper: {
            "corpus": ["wikitext"],
            "ladder": ["512"],
            "budgets": ["1.1e9"],
            "seeds": 3,
            "seq_len": PAPER_CONTEXT,
            "batch_size": 32,
            "eval_batches": 4,
            "keys": ["trainer.precision=bf16"],  # the GPU-hours are at bf16's peak
        },
    }
    """laptop: the three bundled corpora, whose documents are tens, hundreds and thousands of tokens long
    (docs/data.md), micro and tiny, two budgets, windows of 512 (a window holds a story whole, or a long piece of an
    article); paper:
    width 512 (lmpt.reproduce.ladder: the paper's smallest size or just above it) at about 20 tokens a parameter
    (compute-optimal), in the paper's 2,048-token context, on long documents (WikiText's bundled articles plan it; a
    launch needs a `corpus=` the budget reads at most MAX_EPOCHS times), in bf16. Besides the grid keys: each scale's
    window length, windows a step, held-out batches and the run keys it adds."""

    def __init__(self, scale: Scale = Scale.laptop, seeds: int | None = None, **given: list[str]) -> None:
        super().__init__(scale, seeds, **given)
        setting = self.scales[self.scale]
        self.seq_len = int(setting["seq_len"])
        self.batch_size = int(setting["batch_size"])
        self.eval_batches = int(setting["eval_batches"])
        self.run_keys = tuple(setting["keys"])
        self.vocab = int(TokenizerConfig.vocab_size or 0)
        self.corpora: dict[str, tuple[str, ...]] = {}
        for corpus in self.grid["corpus"]:
            label = corpus_label(corpus)
            if label in self.corpora:
                raise LmptError(f"corpus=[{','.join(self.grid['corpus'])}] names {label} twice: give each text once")
            self.corpora[label] = corpus_keys(corpus)
        widths = [NAMED_WIDTHS.get(raw, None) or _width(raw) for raw in self.grid["ladder"]]
        if len(set(widths)) < len(widths):
            raise LmptError(f"ladder=[{','.join(self.grid['ladder'])}] names a width twice: give each model once")
        self.shapes = check_ladder(sorted(widths), self.vocab, self.seq_len)
        budgets = sorted({int(b) for b in numbers(self, "budgets", float, least=1)})
        least = MIN_STEPS * self.tokens_per_step
        if budgets[0] < least:
            raise LmptError(
                f"budgets={budgets[0]:g} buys fewer than {MIN_STEPS} optimizer steps of {self.tokens_per_step:,} "
                f"tokens: give budgets of at least {least:,} tokens"
            )
        self.budgets = budgets

    @property
    def tokens_per_step(self) -> int:
        """Training tokens an optimizer step reads: batch_size windows of seq_len."""
        return self.batch_size * self.seq_len

    def steps(self, tokens: int) -> int:
        return round(tokens / self.tokens_per_step)

    def runs(self) -> list[PlannedRun]:
        planned = []
        for corpus, data_keys in self.corpora.items():
            for shape in self.shapes:
                label = model_label(shape)
                rate = (
                    label if self.seq_len == 128 else f"{label}@{self.seq_len}"
                )  # the model on longer windows, as its tables name it
                for tokens in self.budgets:
                    steps = self.steps(tokens)
                    trained = steps * self.tokens_per_step
                    keys = (
                        *data_keys,
                        *shape.keys(),
                        f"data.seq_len={self.seq_len}",
                        f"trainer.batch_size={self.batch_size}",
                        f"trainer.max_steps={steps}",
                        f"trainer.eval_every={max(1, steps // 3)}",
                        f"trainer.eval_batches={self.eval_batches}",
                        "trainer.sample_tokens=0",
                        f"downstream.tasks=[bundled:{ZORRO}]",  # grammar beside the untrained control
                        *self.run_keys,
                    )
                    for seed in range(self.seeds):
                        for arm, arm_keys in ARMS.items():
                            planned.append(
                                PlannedRun(
                                    f"{corpus}-{label}-{count_text(tokens)}-{arm}-seed{seed}",
                                    (*arm_keys, *keys, f"trainer.seed={seed}"),
                                    {
                                        "corpus": corpus,
                                        "model": rate,
                                        "width": shape.width,
                                        "tokens": tokens,
                                        "objective": arm,
                                        "seed": seed,
                                    },
                                    shape.flops_per_token * trained,
                                    6.0 * shape.matmul_parameters * trained,
                                )
                            )
        return planned

    def check_text(self) -> None:
        """Refuse, before any run starts, a corpus the largest budget would read more than MAX_EPOCHS times (its text
        tokenised into lmpt's cache, as the runs would)."""
        needed = max(self.budgets) / MAX_EPOCHS
        for corpus, data_keys in self.corpora.items():
            keys = (*data_keys, f"data.seq_len={self.seq_len}")
            held = prepare_corpus(keys, corpus)
            if held < needed:
                raise LmptError(
                    f"corpus {corpus} holds {held:,} training tokens and budgets={max(self.budgets):g} would read it "
                    f"{max(self.budgets) / held:.1f} times, more than {MAX_EPOCHS:g}: give a text of at least "
                    f"{math.ceil(needed):,} tokens (corpus=PATH) or smaller budgets"
                )


def _width(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise LmptError(
            f"ladder={raw} must be a model width (a whole number) or one of {', '.join(NAMED_WIDTHS)}"
        ) from None
