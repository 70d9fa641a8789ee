"""What the crossover grid finds, judged by lmpt.reproduce.verdict.judge: at each U, "mdlm's frontier crosses below
clm's near C_crit(U)" (within a factor NEAR); over two or more U, "the critical compute grows as U^2.174"; and the
conditions they depend on, computed from the plan. A grid that misses the paper's conditions (models of 7M to 2.5B
parameters, U of 25M to 100M, compute-optimal sizes, the recipe, compute past the law) and finds no crossing is
inconclusive at this scale: Ni et al. 2025 ("Training Optimal Large Diffusion Language Models") find the crossover
comes later for smaller models."""

from __future__ import annotations

import math
from dataclasses import dataclass

from lmpt.config.schema import DataConfig
from lmpt.downstream.significance import seed_interval
from lmpt.reproduce.crossover.frontier import LAW, AtUnique, log_interval, power_law, too_wide
from lmpt.reproduce.crossover.plan import CAP_FACTOR, OBJECTIVES, RECIPE, CrossoverGrid
from lmpt.reproduce.figures import count_text
from lmpt.reproduce.ladder import Shape, optimal_parameters
from lmpt.reproduce.reproduction import PlannedRun
from lmpt.reproduce.verdict import ClaimVerdict, Condition, Evidence, judge, within_margin

NEAR = 3.0
"""A crossing within this factor of the law's C_crit(U) (either side) is near it."""
REACH = 3.0
"""How far past C_crit(U) (6 N D, in multiples of it) a grid must reach for "no crossing" to count against the law."""
EXPONENT_MARGIN = 0.5
"""The exponent of C_crit(U) fitted through lmpt's crossings agrees with the law's when its interval lies within this
of 2.174 (over a fourfold span of U, a factor of 2 in C_crit)."""
SIZING_FACTOR = 2.0
"""A budget has its compute-optimal size when a model it trains is within this factor of D / 20 parameters."""
PAPER_PARAMETERS = (7e6, 2.5e9)
PAPER_UNIQUE = (25e6, 100e6)
PAPER_EPOCHS = 800
PAPER_RECIPE = (
    "AdamW (0.9, 0.95), lr 2e-4 at 256 x 2,048 tokens a step, weight decay 0.1, dropout 0.1, cosine to 10% of the "
    "peak after a 1% warm-up, the same for both objectives"
)


def conditions(grid: CrossoverGrid, planned: list[PlannedRun], found: list[AtUnique]) -> dict[str, Condition]:
    """The conditions the claims depend on (met or missed) and those stated for the reader, from the plan."""
    sizes = sorted({r.labels["parameters"] for r in planned})
    shapes = sorted({r.labels["width"] for r in planned})
    embedding = [Shape(w, grid.setting.vocab, grid.setting.seq_len) for w in shapes]
    shares = [s.vocab * s.width / s.parameters for s in embedding]
    budgets = sorted({(r.labels["unique"], r.labels["epochs"]) for r in planned})
    sized = [(u, e) for u, e in budgets if _has_optimal(planned, u, e)]
    ratios = [r.labels["tokens"] / r.labels["parameters"] for r in planned]
    recipe = _recipe(planned)
    seen_epochs = [c.labels["epochs"] for at in found for c in at.cells if c.bits]
    setting = grid.setting
    low_u, high_u = PAPER_UNIQUE
    return {
        "parameters": Condition(
            "model sizes (parameters with the embedding)",
            f"{count_text(PAPER_PARAMETERS[0])} to {count_text(PAPER_PARAMETERS[1])}",
            f"{count_text(sizes[0])} to {count_text(sizes[-1])}",
            sizes[0] >= PAPER_PARAMETERS[0],
            "" if sizes[0] >= PAPER_PARAMETERS[0] else "smaller models cross later (Ni et al. 2025)",
        ),
        "non-embedding": Condition(
            "non-embedding parameters",
            "not stated apart (their N counts the embedding)",
            f"{count_text(embedding[0].matmul_parameters)} to {count_text(embedding[-1].matmul_parameters)} "
            f"({min(shares):.0%} to {max(shares):.0%} of each model in its embedding)",
        ),
        "sizing": Condition(
            "compute-optimal sizing",
            "each budget's compute-optimal size on the frontier (about 20 tokens a parameter)",
            f"{len(sized)} of {len(budgets)} budgets within {SIZING_FACTOR:g}x of D / 20 parameters; "
            f"{min(ratios):.2g} to {max(ratios):.3g} tokens a parameter",
            len(sized) == len(budgets),
            _sizing_gaps(grid, [b for b in budgets if b not in sized]),
        ),
        "unique": Condition(
            "unique tokens U",
            f"{count_text(low_u)} to {count_text(high_u)}",
            ", ".join(count_text(u) for u in grid.unique),
            min(grid.unique) >= low_u,
            "" if min(grid.unique) >= low_u else f"the law extrapolated {low_u / max(grid.unique):.3g}x below",
        ),
        "recipe": Condition(
            "training recipe",
            PAPER_RECIPE,
            recipe.text,
            recipe.met,
            recipe.why,
        ),
        "epochs": Condition(
            "epochs",
            f"up to {PAPER_EPOCHS}",
            f"{_epochs_text(grid.epochs)} planned; "
            + (f"up to {max(seen_epochs):g} completed" if seen_epochs else "none completed"),
        ),
        "vocabulary": Condition(
            "vocabulary",
            "GPT-2's BPE, 50,257 pieces",
            f"{setting.tokenizer} trained on the corpus, {setting.vocab:,} pieces",
        ),
        "context": Condition(
            "context and batch",
            "2,048 tokens, 256 sequences a step",
            f"{setting.seq_len:,} tokens, {setting.batch * setting.accum} sequences a step",
        ),
        "loss": Condition(
            "what the loss is measured on",
            "C4's validation documents: AR's loss, diffusion's bound (ELBO)",
            f"the same held-out windows of {grid.corpus} ({DataConfig().val_fraction:.0%} of its documents) for "
            "both: clm's exact bits per token, mdlm's bound",
        ),
    }


def _has_optimal(planned: list[PlannedRun], unique: int, epochs: float) -> bool:
    best = optimal_parameters(unique * epochs)
    return any(
        abs(math.log(r.labels["parameters"] / best)) <= math.log(SIZING_FACTOR)
        for r in planned
        if r.labels["unique"] == unique and r.labels["epochs"] == epochs
    )


def _sizing_gaps(grid: CrossoverGrid, lacking: list[tuple[int, float]]) -> str:
    """Why budgets lack their compute-optimal size: the ladder ends below or above it, its model is above the cap, or
    the ladder steps over it."""
    reasons = {"small": 0, "large": 0, "cap": 0, "gap": 0}
    for unique, epochs in lacking:
        best = optimal_parameters(unique * epochs)
        near = [s for s in grid.ladder if abs(math.log(s.parameters / best)) <= math.log(SIZING_FACTOR)]
        if best < grid.ladder[0].parameters / SIZING_FACTOR:
            reasons["small"] += 1
        elif best > grid.ladder[-1].parameters * SIZING_FACTOR:
            reasons["large"] += 1
        else:
            reasons["cap" if near else "gap"] += 1
    words = {
        "small": "need a model smaller than the ladder's smallest",
        "large": "need one larger than its largest",
        "cap": f"have theirs above {CAP_FACTOR:g}x C_crit",
        "gap": "fall between its rungs",
    }
    return ", ".join(f"{n} budget(s) {words[k]}" for k, n in reasons.items() if n)


def reach_condition(found: list[AtUnique], only: AtUnique | None = None) -> Condition:
    """How far past C_crit(U) the completed runs reach (6 N D): all U, or `only` one."""
    chosen = [only] if only is not None else found
    reached = [at for at in chosen if any(c.bits for c in at.cells)]
    text = "; ".join(f"{at.reach:.2g}x at U = {count_text(at.unique)}" for at in reached) or "no completed run"
    met = bool(reached) and len(reached) == len(chosen) and min(at.reach for at in reached) >= REACH
    return Condition(
        "compute reached (6ND, in multiples of C_crit(U), from the completed runs)",
        "past C_crit(U), where the crossing is seen",
        text,
        met,
        "" if met else f"the claim needs {REACH:g}x",
    )


def _depends(general: dict[str, Condition], reach: Condition) -> list[Condition]:
    return [general[k] for k in ("parameters", "sizing", "unique", "recipe")] + [reach]


def near_claim(at: AtUnique, general: dict[str, Condition]) -> ClaimVerdict:
    """At one U: mdlm's frontier crosses below clm's within a factor NEAR of the law's C_crit(U), read off the
    interval of the seeds' crossings."""
    claim = f"at U = {count_text(at.unique)}, mdlm's frontier crosses below clm's near C_crit(U) = {at.law:.2e}"
    conditions = _depends(general, reach_condition([at], at))
    if at.missing:
        return judge(claim, Evidence.missing, "", conditions, _missing_text(at))
    crossings = at.seed_crossings()
    crossed = [c for c in crossings if c is not None]
    if not crossed:
        figure = f"no crossing up to {at.reach:.2g}x C_crit (6ND)"
        if at.reach >= REACH:
            why = f"no seed's mdlm frontier is below clm's at the grid's end ({len(crossings)} seeds)"
            return judge(claim, Evidence.contradicts, figure, conditions, why)
        why = f"the grid reaches only {at.reach:.2g}x C_crit, short of {REACH:g}x"
        return judge(claim, Evidence.undecided, figure, conditions, why)
    mean = at.crossing()
    lmpt_count = at.crossing("lmpt") or math.nan
    figure = (
        f"crossing at {mean:.2e} FLOPs (6ND), {mean / at.law:.2g}x the law; {lmpt_count:.2e} in lmpt's count"
        if mean
        else f"each seed's crossing: {crossings_text(crossings)}"
    )
    if len(crossed) < len(crossings):
        why = f"{len(crossed)} of {len(crossings)} seeds' frontiers cross ({crossings_text(crossings)})"
        return judge(claim, Evidence.undecided, figure, conditions, why)
    span = log_interval(crossed)
    if span is None:
        return judge(claim, Evidence.undecided, figure, conditions, "one seed: no interval")
    note = too_wide(crossed, span, geometric=True)
    if note:
        return judge(claim, Evidence.undecided, figure, conditions, note)
    low, high = span
    evidence = within_margin(math.log(low / at.law), math.log(high / at.law), math.log(NEAR))
    why = f"95% t interval over seeds {low:.2e} to {high:.2e}, {low / at.law:.2g}x to {high / at.law:.2g}x the law"
    return judge(claim, evidence, figure, conditions, why)


def exponent_claim(found: list[AtUnique], general: dict[str, Condition], seeds: int) -> ClaimVerdict:
    """Over two or more U: the exponent of a power law through each seed's crossings within EXPONENT_MARGIN of the
    law's."""
    claim = f"the critical compute grows as U^{LAW[1]} across U"
    conditions = _depends(general, reach_condition(found))
    short = [at for at in found if at.missing]
    if short:
        why = "; ".join(_missing_text(at) for at in short)
        return judge(claim, Evidence.missing, "", conditions, why)
    mean = power_law({at.unique: c for at in found if (c := at.crossing())})
    figure = f"exponent {mean[1]:.2f} through the seed means' crossings" if mean else "fewer than two U cross"
    exponents = []
    for seed in range(seeds):
        crossings = {at.unique: c for at in found if (c := at.seed_crossings()[seed])}
        fit = power_law(crossings)
        if fit:
            exponents.append(fit[1])
    if len(exponents) < seeds or len(exponents) < 2:
        why = f"{len(exponents)} of {seeds} seeds cross at two or more U: no interval of the exponent"
        return judge(claim, Evidence.undecided, figure, conditions, why)
    span = seed_interval(exponents)
    assert span is not None
    note = too_wide(exponents, span)
    if note:
        return judge(claim, Evidence.undecided, figure, conditions, note)
    evidence = within_margin(span[0] - LAW[1], span[1] - LAW[1], EXPONENT_MARGIN)
    why = f"95% t interval over seeds {span[0]:.2f} to {span[1]:.2f}; within {EXPONENT_MARGIN:g} of {LAW[1]} agrees"
    return judge(claim, evidence, figure, conditions, why)


@dataclass(frozen=True)
class RecipeCheck:
    text: str
    met: bool
    why: str


def _recipe(planned: list[PlannedRun]) -> RecipeCheck:
    """The recipe every planned run is launched with, read from its keys, against the paper's."""
    keyed = [dict(k.split("=", 1) for k in run.keys) for run in planned]
    first = keyed[0]
    met = all(all(keys.get(k) == v for k, v in RECIPE.items()) for keys in keyed)
    warmups = [int(keys["scheduler.warmup_steps"]) / int(keys["trainer.max_steps"]) for keys in keyed]
    text = (
        f"{first.get('optimizer', 'muon')}, lr {first.get('optimizer.lr', 'default')}, weight decay "
        f"{first.get('optimizer.weight_decay', 'default')}, dropout {first.get('model.dropout', '0.0')}, "
        f"{first.get('scheduler', 'cosine')} to {first.get('scheduler.min_lr_ratio', 'default')} of the peak, "
        f"warm-up {_span(warmups, '.0%')} of the steps, the same for both objectives"
    )
    why = "lmpt never decays embeddings, norms or biases" + ("" if met else "; a run misses the paper's recipe")
    return RecipeCheck(text, met, why)


def _missing_text(at: AtUnique) -> str:
    total = sum(len(c.planned) for c in at.cells)
    none = [o for o in OBJECTIVES if not any(c.bits for c in at.cells if c.labels["objective"] == o)]
    names = ", ".join(at.missing[:3]) + (", ..." if len(at.missing) > 3 else "")
    head = f"no completed {' or '.join(none)} run at U = {count_text(at.unique)}; " if none else ""
    return f"{head}{len(at.missing)} of {total} planned runs at U = {count_text(at.unique)} not completed ({names})"


def crossings_text(crossings: list[float | None]) -> str:
    """Each seed's crossing in a few digits (none where its frontiers do not cross)."""
    return ", ".join("none" if c is None else f"{c:.2e}" for c in crossings) or "—"


def _span(values: list[float], spec: str) -> str:
    """'LOW to HIGH', or the one value where all are equal in `spec`."""
    low, high = f"{min(values):{spec}}", f"{max(values):{spec}}"
    return low if low == high else f"{low} to {high}"


def _epochs_text(epochs: list[float]) -> str:
    return ", ".join(f"{e:g}" for e in epochs)
