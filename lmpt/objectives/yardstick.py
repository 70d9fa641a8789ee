"""The fixed yardsticks: held-out windows scored the same way in every run.

Likelihood models (Objective.likelihood) share one axis, validation bits per token of the same held-out windows:
exact for clm (its validation loss / ln 2), an upper bound for masked diffusion (mdlm), estimated over
`yardstick_draws` passes of fixed masks whose spread gives the estimate's standard error.

Masked objectives (mlm, nsp) are scored at one masking rate shared by every run.

A run's own validation loss is measured at its training `mask_prob`, so a 40% run and a 5% run report
losses on different tasks. The yardstick masks `eval_mask_prob` of the tokens, every selected one replaced
by [MASK], token by token (no whole-word grouping), with draws seeded by the validation batch index alone:
two runs that differ in mask_prob, replacement fractions, whole_word or trainer.seed score the same
positions of the same windows."""

from __future__ import annotations

import math
import statistics
from typing import Any

import torch

from lmpt.objectives.schema import ObjectiveConfig
from lmpt.rng import generator

BITS_PER_TOKEN = "val_bits_per_token"
"""metrics.jsonl key of the likelihood yardstick (bits per held-out token); its standard error is
val_bits_per_token_stderr (0 for an exact likelihood); the run's objective says which (Objective.likelihood)."""
MAX_STDERR_BITS = 0.01
"""The bound's standard error the default draws keep below on the default held-out windows."""

YARDSTICK_PREFIX = "val_fixed_"
"""metrics.jsonl keys of the yardstick: val_fixed_loss (masked-token nats), val_fixed_acc, val_fixed_ppl."""


def eval_mask_prob(objective_cfg: ObjectiveConfig) -> float | None:
    """The yardstick's masking rate, or None for objectives without one (clm, span, prefix, ul2-mixture)."""
    rate = getattr(objective_cfg, "eval_mask_prob", None)  # a DictConfig's missing key is an AttributeError too
    return None if rate is None else float(rate)


def perplexity(loss: float) -> float:
    """exp(loss) of nats per token, infinite where exp overflows (a diverged run's loss)."""
    return math.exp(loss) if loss < 700 else math.inf


def yardstick_generator(source: str, batch_index: int, draw: int = 0) -> torch.Generator:
    """The draws of validation batch `batch_index` of `source` ("" for a run with one source) in pass `draw`: the
    same in every run, whatever its seed or settings."""
    return generator("yardstick", *([source] if source else []), batch_index, *([draw] if draw else []))


def draw_groups(batches: list, draws: int) -> list[list]:
    """`batches` (draw 0's, then draw 1's, ...) cut into `draws` equal passes."""
    per = len(batches) // max(1, draws)
    return [batches[k * per : (k + 1) * per] for k in range(draws)] if per else []


def exact_bits_per_token(nats_per_token: float) -> dict[str, Any]:
    """The yardstick of an exact likelihood (clm): its held-out nats per token in bits, with no sampling error."""
    return {BITS_PER_TOKEN: nats_per_token / math.log(2), f"{BITS_PER_TOKEN}_stderr": 0.0}


def bound_bits_per_token(pass_nats: list[float]) -> dict[str, Any]:
    """The yardstick of a bound (mdlm) from each fixed pass's nats per token: their mean in bits, and its standard
    error (the passes are independent draws over the same windows: sample standard deviation / sqrt(passes))."""
    bits = [n / math.log(2) for n in pass_nats]
    stderr = statistics.stdev(bits) / math.sqrt(len(bits)) if len(bits) > 1 else math.nan
    return {BITS_PER_TOKEN: statistics.fmean(bits), f"{BITS_PER_TOKEN}_stderr": stderr}
