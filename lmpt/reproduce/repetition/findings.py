"""What the repetition grid finds, judged by lmpt.reproduce.verdict beside the conditions computed from the grid: clm's
R_D* and R_N* against the paper's (their bootstrap intervals holding the paper's value or not), and masked diffusion's
R_D* above autoregression's (Prabhudesai et al. 2025 find it far larger)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from lmpt.reproduce.data_constrained_law import PAPER_LAW, Decay
from lmpt.reproduce.ladder import TOKENS_PER_PARAMETER, Shape, optimal_parameters
from lmpt.reproduce.repetition.fit import Fitted, star_figure, star_interval
from lmpt.reproduce.repetition.plan import OBJECTIVES, PAPER_CONTEXT, PAPER_VOCAB, RepetitionGrid
from lmpt.reproduce.reproduction import AR, DIFFUSION, PlannedRun
from lmpt.reproduce.verdict import ClaimVerdict, Condition, Evidence, below, inside, judge

DIFFUSION_R_D_STAR = 500.0
"""R_D* of masked diffusion as Prabhudesai et al. 2025 fit it ("about 500"), shown beside mdlm's; not judged."""
PAPER_PARAMETERS = (7_098_752, 8.67e9)
PAPER_UNIQUE = (1e8, 1.78e11)
PAPER_EPOCHS = (1, 9_000)
PAPER_TOKENS_PER_PARAMETER = (0.091, 63_830)
PAPER_EXCESS = (0.065, 215)
"""The ranges of the notebook's fitted runs (its data cell "outliers removed", 182 runs): parameters with the
embedding, unique tokens, epochs, tokens per parameter, and N / N_opt(U) with N_opt(U) = U / 19.6 (their C4 law)."""
PRABHUDESAI_PARAMETERS = 7e6
"""Prabhudesai et al.'s smallest model (7M to 2.5B parameters)."""
OPTIMAL_FACTOR = 2.0
"""A rung within this factor of a budget's compute-optimal size (D / 20) is compute-optimal for it: a budget's
single-epoch runs are the rungs of at most that size, and the one nearest it should be within this factor."""
RECOVERY_TOLERANCE = 0.25
"""The grid identifies the law when, from runs the law makes at its points, the fit gives back R_D* and R_N* within
this share."""


def parameters_condition(ladder: Sequence[Shape], smallest: float, whose: str) -> Condition:
    """The ladder's parameters (with the embedding) against the paper's range, met from `whose` smallest size."""
    params = [s.parameters for s in ladder]
    return Condition(
        "parameters",
        f"{PAPER_PARAMETERS[0] / 1e6:.1f}M to {PAPER_PARAMETERS[1] / 1e9:.1f}B (with the embedding)",
        f"{min(params):,} to {max(params):,} (" + ", ".join(f"w{s.width}" for s in ladder) + ")",
        max(params) >= smallest,
        f"the largest rung against {whose}",
    )


def loss_condition(corpus: str, objective: str) -> Condition:
    """What `objective`'s loss is measured on, beside the paper's."""
    if objective == AR:
        return Condition(
            "loss (clm)",
            "C4's held-out cross-entropy, nats a token",
            f"held-out nats a token on {corpus}'s held-out windows (exact)",
            True,
        )
    return Condition(
        "loss (mdlm)",
        "Prabhudesai et al.: the diffusion model's held-out loss (its bound)",
        "the diffusion bound in nats a token on the same windows: an upper bound on the negative log-likelihood",
        None,
    )


def conditions(
    grid: RepetitionGrid, planned: list[PlannedRun], recovered: tuple[float, float] | None
) -> list[Condition]:
    """The conditions table, computed from the grid (the planned runs, one seed and objective)."""
    runs = [r.labels for r in planned if r.labels["seed"] == 0 and r.labels["objective"] == AR]
    excess = [r["parameters"] / optimal_parameters(r["seen"]) for r in runs]
    epochs = [r["tokens"] / r["seen"] for r in runs]
    repeated = sorted({r["seen"] for r in runs if r["tokens"] > r["seen"]})
    once = sorted({r["seen"] for r in runs if r["tokens"] <= r["seen"]})
    near = grid.stage_one_runs()
    conditions = [
        parameters_condition(grid.ladder, PAPER_PARAMETERS[0], "the paper's smallest model"),
        replace(
            parameters_condition(grid.ladder, PRABHUDESAI_PARAMETERS, "Prabhudesai et al.'s smallest model"),
            name="parameters (diffusion)",
            paper=f"{PRABHUDESAI_PARAMETERS / 1e6:g}M to 2.5B (Prabhudesai et al.)",
        ),
        Condition(
            "non-embedding parameters",
            "not counted apart (the paper's counts include the embedding)",
            ", ".join(
                f"w{s.width} {s.matmul_parameters:,} ({s.matmul_parameters / s.parameters:.0%})" for s in grid.ladder
            ),
        ),
    ]
    for shape in grid.ladder:
        mine = [r["tokens"] / r["parameters"] for r in runs if r["width"] == shape.width]
        conditions.append(
            Condition(
                f"tokens per parameter, w{shape.width} ({shape.parameters:,} parameters)",
                f"{PAPER_TOKENS_PER_PARAMETER[0]:g} to {PAPER_TOKENS_PER_PARAMETER[1]:,} (compute-optimal: "
                f"{TOKENS_PER_PARAMETER:g})",
                f"{min(mine):.3g} to {max(mine):.3g}: {min(mine) / TOKENS_PER_PARAMETER:.2g}x to "
                f"{max(mine) / TOKENS_PER_PARAMETER:.2g}x compute-optimal",
            )
        )
    optimal = []
    for cell in grid.cells():
        if cell.tokens <= cell.unique:
            best = min(grid.rungs(cell), key=lambda s: abs(math.log(s.parameters / optimal_parameters(cell.tokens))))
            optimal.append((cell.tokens, best, best.parameters / optimal_parameters(cell.tokens)))
    conditions += [
        Condition(
            "a compute-optimal rung at each budget",
            "Chinchilla's iso-FLOP points: sizes around each budget's optimum",
            "; ".join(f"{b:,}: w{s.width} ({r:.2g}x)" for b, s, r in optimal),
            all(1 / OPTIMAL_FACTOR <= r <= OPTIMAL_FACTOR for _, _, r in optimal),
            f"within {OPTIMAL_FACTOR:g}x of D / {TOKENS_PER_PARAMETER:g}",
        ),
        Condition(
            "excess parameters",
            f"N / N_opt(U) from {PAPER_EXCESS[0]:g} to {PAPER_EXCESS[1]:g}",
            f"N / N_opt(U) from {min(excess):.2g} to {max(excess):.3g} (N_opt(U) = U / {TOKENS_PER_PARAMETER:g})",
            min(excess) <= 1 < max(excess),
            "sizes on both sides of N_opt(U) tell R_N* from R_D*",
        ),
        Condition(
            "unique tokens U",
            f"{PAPER_UNIQUE[0]:,.0f} to {PAPER_UNIQUE[1]:,.0f}",
            f"{', '.join(f'{u:,}' for u in repeated)} repeated; {once[0]:,} to {once[-1]:,} read once"
            if once
            else f"{', '.join(f'{u:,}' for u in repeated)} repeated",
            min(repeated + once) >= PAPER_UNIQUE[0],
        ),
        Condition(
            "epochs",
            f"{PAPER_EPOCHS[0]} to {PAPER_EPOCHS[1]:,}",
            f"{min(epochs):g} to {max(epochs):.3g}",
            max(epochs) - 1 >= PAPER_LAW.r_d_star,
            f"past R_D* = {PAPER_LAW.r_d_star:.1f} repetitions, where the decay bends",
        ),
        Condition(
            "the base law's runs",
            "stage 1 on Chinchilla's 54 C4 iso-FLOP points (E, A, B, alpha = beta)",
            f"stage 1 on the grid's {len(near)} single-epoch runs, {len({n for n, _ in near})} sizes at "
            f"{len({d for _, d in near})} token counts, each at most the compute-optimal size",
            len(near) >= 4,
            "a larger single-epoch model loses to excess parameters, which stage 1 does not model",
        ),
    ]
    if recovered is not None:
        ok = all(
            abs(found / paper - 1) <= RECOVERY_TOLERANCE
            for found, paper in zip(recovered, (PAPER_LAW.r_d_star, PAPER_LAW.r_n_star), strict=True)
        )
        conditions.append(
            Condition(
                "the grid identifies the law",
                f"R_D* {PAPER_LAW.r_d_star:.2f}, R_N* {PAPER_LAW.r_n_star:.2f}",
                "refitted from losses the law makes at this grid's runs (clm's stage 1, the paper's R_D* and "
                f"R_N*): R_D* {recovered[0]:.3g}, R_N* {recovered[1]:.3g}",
                ok,
                f"within {RECOVERY_TOLERANCE:.0%} of the constants it was made with",
            )
        )
    conditions += [
        Condition("vocabulary", f"{PAPER_VOCAB:,} (GPT-2's)", f"{grid.recipe.vocab:,}"),
        Condition("context", f"{PAPER_CONTEXT:,} tokens", f"{grid.recipe.seq_len:,} tokens"),
        Condition(
            "recipe",
            "their Megatron-DeepSpeed recipe, one per size",
            "lmpt's default optimizer, learning rate and schedule for every size and objective (not searched); "
            "warm-up a tenth of each run",
        ),
        loss_condition(grid.corpus, AR),
        loss_condition(grid.corpus, DIFFUSION),
    ]
    return conditions


def star_claim(claim: str, fitted: Fitted, star: str, paper: float, conditions: list[Condition]) -> ClaimVerdict:
    """`star` (r_d_star or r_n_star) of `fitted` equals the paper's: its bootstrap interval holds `paper`."""
    symbol = "R_D*" if star == "r_d_star" else "R_N*"
    if fitted.missing:
        return judge(claim, Evidence.missing, "", conditions, missing_text(fitted.missing))
    if fitted.both is None:
        return judge(claim, Evidence.undecided, "", conditions, "; ".join(fitted.notes) or "no fit")
    low, high = star_interval(fitted, Decay.both, star)
    figure = f"{symbol} = {star_figure(fitted, star)} against the paper's {paper:.2f}"
    why = "" if math.isfinite(low) else "no interval: " + ("; ".join(fitted.notes) or "one seed")
    return judge(claim, inside(low, high, paper), figure, conditions, why)


def diffusion_claim(fits: dict[str, Fitted], conditions: list[Condition]) -> ClaimVerdict:
    """Masked diffusion's R_D* above autoregression's: the interval of log(R_D*(clm) / R_D*(mdlm)) from the two
    intervals' far ends (a conservative comparison) below 0."""
    claim = "R_D* of masked diffusion exceeds autoregression's"
    lost = fits[AR].missing + fits[DIFFUSION].missing
    if lost:
        return judge(claim, Evidence.missing, "", conditions, missing_text(lost))
    if fits[AR].both is None or fits[DIFFUSION].both is None:
        notes = fits[AR].notes + fits[DIFFUSION].notes
        return judge(claim, Evidence.undecided, "", conditions, "; ".join(notes) or "no fit")
    (clm_low, clm_high), (mdlm_low, mdlm_high) = (star_interval(fits[o], Decay.both, "r_d_star") for o in OBJECTIVES)
    low, high = math.log(clm_low / mdlm_high), math.log(clm_high / mdlm_low)
    figure = (
        f"mdlm {star_figure(fits[DIFFUSION], 'r_d_star')} against clm {star_figure(fits[AR], 'r_d_star')} "
        f"(Prabhudesai et al.: about {DIFFUSION_R_D_STAR:g} against {PAPER_LAW.r_d_star:.1f})"
    )
    return judge(claim, below(low, high, 0.0), figure, conditions, "" if math.isfinite(low) else "no interval")


def missing_text(names: Sequence[str]) -> str:
    """The runs a claim lacks, the first four named."""
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return f"{len(names)} run(s) not completed: {shown}"
