"""The data-constrained scaling law of Muennighoff et al. 2023 ("Scaling Data-Constrained Language Models",
arXiv:2305.16264) and its fit, as their notebook (huggingface/datablations, utils/parametric_fit.ipynb) makes it:

    L(N, D, U) = E + A / N'^alpha + B / D'^beta                                       (nats per token)
    D' = U + U R_D* (1 - exp(-R_D / R_D*)),     R_D = D / U - 1                       (epochs past the first)
    N' = U_N + U_N R_N* (1 - exp(-R_N / R_N*)), U_N = min(N, N_opt(U)), R_N = max(N / U_N - 1, 0)

| step                   | the notebook                                              | here                      |
| ---------------------- | --------------------------------------------------------- | ------------------------- |
| parameters             | a = log A, b = log B, e = log E, alpha, beta; R_D*, R_N*  | the same                  |
| log L predicted        | logsumexp(a - alpha log N', b - beta log D', e)           | the same                  |
| objective              | Huber, delta 1e-3, on log L, summed over runs             | `HUBER_DELTA`             |
| optimiser              | torch L-BFGS, strong Wolfe, from every start of a grid    | scipy L-BFGS-B, gradient  |
| stage 1: base law      | E + A/N^alpha + B/D^beta, alpha = beta, 400 starts        | `fit_base_law`, BASE_GRID |
| stage 2: R_D*, R_N*    | jointly, stage 1 held, every run; starts 0 to 20 (4 each) | `fit_law`, STAR_GRID      |
| decay data only        | N' = N, R_D* alone, stage 1 held                          | `decay="data"`            |
| N_opt(U)               | from stage 1's law (the compute where U is optimal)       | `optimal_params`          |
| runs                   | one per configuration, outliers removed by hand           | `include_points`          |

The notebook's stage 1 is fitted on Chinchilla's C4 iso-FLOP points (54, digitised from Hoffmann et al.'s appendix),
not on its own runs: the five numbers of `PAPER_LAW`. `fit_law` fits stage 1 on the caller's single-epoch runs
(D = U) unless a `base` is given; `base=PAPER_LAW` is the notebook's stage 2 exactly. Single-epoch runs far above
N_opt(U) pull stage 1 away from Chinchilla's law (the full law says their excess parameters are worth less), and
N_opt and R_N* with it: give `base` where a ladder has many. The published fit on 182 runs: R_D* = 15.39, R_N* =
5.31; with parameters left undecayed, R_D* = 2.92 (`PAPER_DATA_ONLY_R_D_STAR`). This module's fit of the notebook's
182 runs with base=PAPER_LAW gives 15.37, 5.32 and 2.915.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from lmpt.config.schema import Choice
from lmpt.errors import LmptError

HUBER_DELTA = 1e-3
"""The Huber loss's delta on log loss (the notebook's, after Hoffmann et al. 2022)."""
BASE_GRID = {
    "a": np.linspace(0, 25, 5),
    "b": np.linspace(0, 25, 5),
    "e": np.linspace(-1, 1, 4),
    "alpha": np.linspace(0, 2, 4),
    "beta": np.linspace(0, 2, 4),
}
"""Stage 1's starts, the notebook's (400 with alpha = beta tied; beta's values join only when untied: 1,600)."""
STAR_GRID = np.linspace(0, 20, 4)[1:]
"""Stage 2's starts for each of R_D*, R_N*: the notebook's np.linspace(0, 20, 4) less its 0, where the decay divides
0 by 0 and the notebook's start ends in NaN (it never wins there either)."""
R_STAR_BOUNDS = (1e-2, 1e4)
"""Where R_D* and R_N* are searched (L-BFGS-B's bounds); a fit at the top means repetition costs nothing the points
show (the fit cannot tell it from infinity)."""
OPTIONS = {"maxiter": 2000, "ftol": 1e-12, "gtol": 1e-10}
"""L-BFGS-B's stopping rule: tighter than scipy's default, as the Huber objective of a good fit is small (1e-4)."""
SINGLE_EPOCH = 1e-9
"""A run whose D exceeds U by at most this share reads its data once (R_D = 0): stage 1's runs."""


class Decay(Choice):
    """Which terms of the law decay with repetition."""

    both = "both"
    """The paper's law: repeated data and excess parameters both lose value (R_D*, R_N*)."""
    data = "data"
    """Repeated data alone: N' = N (the notebook's "Default but decay data only not params")."""


class LossUnit(Choice):
    """The unit of the losses given: the law and its fit work in nats, as the paper's losses are."""

    nats = "nats"
    bits = "bits"

    def to_nats(self, values: np.ndarray) -> np.ndarray:
        """`values` (in this unit) in nats."""
        return values * math.log(2) if self is LossUnit.bits else values


@dataclass(frozen=True)
class LossPoint:
    """One finished run: its parameters N, training tokens D, unique tokens U and held-out loss (nats unless the
    function reading it is told `unit=bits`)."""

    params: float
    tokens: float
    unique: float
    loss: float
    seed: int = 0
    objective: str = ""
    """What trained it (a run of another objective is another cell)."""
    name: str = ""
    """The run's name: what a hand-made leave-out list names it by."""

    @property
    def cell(self) -> tuple[str, float, float, float]:
        """(objective, N, D, U): the runs that differ only in their seed."""
        return (self.objective, self.params, self.tokens, self.unique)


def _effective(unique: np.ndarray, repeats: np.ndarray, r_star: float) -> np.ndarray:
    """U + U R* (1 - exp(-R / R*)); an infinite R* is no decay (U + U R)."""
    if math.isinf(r_star):
        return unique * (1.0 + repeats)
    return unique * (1.0 - r_star * np.expm1(-repeats / r_star))


def _effective_slope(repeats: np.ndarray, r_star: float) -> np.ndarray:
    """d log(effective) / d R*: the decay's share (1 - exp(-R/R*) - (R/R*) exp(-R/R*)) over 1 + R*(1 - exp(-R/R*))."""
    decayed = np.exp(-repeats / r_star)
    return (1.0 - decayed - repeats / r_star * decayed) / (1.0 - r_star * np.expm1(-repeats / r_star))


@dataclass(frozen=True)
class DataConstrainedLaw:
    """The law's seven numbers; L in nats per token. An infinite R_D* (R_N*) leaves data (parameters) undecayed:
    with both infinite it is Chinchilla's law, stage 1's."""

    E: float
    """The irreducible loss (nats)."""
    A: float
    """The parameter term's scale."""
    B: float
    """The data term's scale."""
    alpha: float
    """The parameter term's exponent."""
    beta: float
    """The data term's exponent."""
    r_d_star: float = math.inf
    """R_D*: the repeated epochs at which data's value has decayed by 1 - 1/e."""
    r_n_star: float = math.inf
    """R_N*: the same for parameters in excess of N_opt(U)."""

    def optimal_params(self, unique: np.ndarray | float) -> np.ndarray:
        """N_opt(U), the notebook's `optimal_N(D_to_C(U))` with this law's A, B, alpha, beta (the notebook's own
        C4 ones, stage 1's): the compute C at which U tokens are Chinchilla-optimal, D_opt(C) = (C/6)^(alpha/(alpha +
        beta)) / G, and the optimal N at that C, N_opt(C) = G (C/6)^(beta/(alpha + beta)), G = (alpha A / (beta
        B))^(1/(alpha + beta)); together N_opt(U) = G (G U)^(beta/alpha), U / 19.6 with the paper's numbers."""
        g = (self.alpha * self.A / (self.beta * self.B)) ** (1.0 / (self.alpha + self.beta))
        return g * np.power(g * np.asarray(unique, dtype=float), self.beta / self.alpha)

    def effective_data(self, tokens: np.ndarray | float, unique: np.ndarray | float) -> np.ndarray:
        """D' = U + U R_D* (1 - exp(-R_D / R_D*)), R_D = D / U - 1."""
        tokens, unique = np.asarray(tokens, dtype=float), np.asarray(unique, dtype=float)
        return _effective(unique, np.maximum(tokens / unique - 1.0, 0.0), self.r_d_star)

    def effective_params(self, params: np.ndarray | float, unique: np.ndarray | float) -> np.ndarray:
        """N' = U_N + U_N R_N* (1 - exp(-R_N / R_N*)), U_N = min(N, N_opt(U)), R_N = max(N / U_N - 1, 0)."""
        params = np.asarray(params, dtype=float)
        base = np.minimum(params, self.optimal_params(unique))
        return _effective(base, np.maximum(params / base - 1.0, 0.0), self.r_n_star)

    def predict(self, params: np.ndarray | float, tokens: np.ndarray | float, unique: np.ndarray | float) -> np.ndarray:
        """L(N, D, U) in nats per token, element by element (the arrays broadcast)."""
        params, tokens, unique = _checked(params, tokens, unique)
        data = self.effective_data(tokens, unique)
        return self.E + self.A / self.effective_params(params, unique) ** self.alpha + self.B / data**self.beta


PAPER_LAW = DataConstrainedLaw(
    E=math.exp(0.6254804),
    A=math.exp(6.255414),
    B=math.exp(7.3049974),
    alpha=0.3526596,
    beta=0.3526596,
    r_d_star=15.387756,
    r_n_star=5.309743,
)
"""The published fit (the datablations README and the notebook's "Default" cell): e, a, b, alpha = beta from
Chinchilla's C4 points, then R_D* and R_N* on the paper's 182 runs."""
PAPER_DATA_ONLY_R_D_STAR = 2.9157212
"""R_D* of the notebook's "Default but decay data only not params" fit: the same runs with N' = N."""


def _checked(
    params: np.ndarray | float, tokens: np.ndarray | float, unique: np.ndarray | float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    params, tokens, unique = (np.asarray(x, dtype=float) for x in (params, tokens, unique))
    if not (np.all(params > 0) and np.all(unique > 0)):
        raise LmptError("the data-constrained law needs N > 0 and U > 0: give every run's parameters and unique tokens")
    if np.any(unique > tokens * (1 + SINGLE_EPOCH)):
        raise LmptError("a run has more unique tokens than training tokens (U > D): give it U = the tokens it read")
    return params, tokens, unique


def _arrays(points: Sequence[LossPoint], unit: LossUnit) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """N, D, U and log L (nats) of `points`, checked."""
    if not points:
        raise LmptError("no runs to fit the data-constrained law to: finish some runs first")
    columns = np.array([(p.params, p.tokens, p.unique, p.loss) for p in points], dtype=float).T
    params, tokens, unique = _checked(*columns[:3])
    losses = unit.to_nats(columns[3])
    if not np.all(np.isfinite(losses) & (losses > 0)):
        raise LmptError("a run's loss is not a positive number: leave it out first (include_points)")
    return params, tokens, unique, np.log(losses)


Objective = Callable[[np.ndarray], tuple[float, np.ndarray]]


def _huber_objective(terms: np.ndarray, jacobian: np.ndarray, log_loss: np.ndarray) -> tuple[float, np.ndarray]:
    """The summed Huber loss of logsumexp(terms) against log L and its gradient: terms (3, runs), their jacobian
    (3, runs, parameters)."""
    from scipy.special import huber, logsumexp, softmax

    residual = logsumexp(terms, axis=0) - log_loss
    slope = np.clip(residual, -HUBER_DELTA, HUBER_DELTA) * softmax(terms, axis=0)
    return float(np.sum(huber(HUBER_DELTA, residual))), np.einsum("kn,knp->p", slope, jacobian)


def _best_start(objective: Objective, grid: np.ndarray, starts: int | None, bounds: list | None) -> np.ndarray:
    """L-BFGS-B from each start of `grid` (or from the `starts` whose objective is lowest), the lowest end kept."""
    from scipy.optimize import minimize
    from threadpoolctl import threadpool_limits

    if starts is not None:
        at_start = np.array([objective(x)[0] for x in grid])
        grid = grid[np.argsort(np.where(np.isfinite(at_start), at_start, np.inf))[:starts]]
    best, best_value = grid[0], math.inf
    # L-BFGS-B's BLAS calls on a handful of numbers: a second thread costs each iteration ten times its work
    with threadpool_limits(limits=1, user_api="blas"), np.errstate(all="ignore"):
        for x0 in grid:
            result = minimize(objective, x0, jac=True, method="L-BFGS-B", bounds=bounds, options=OPTIONS)
            if np.isfinite(result.fun) and result.fun < best_value:
                best, best_value = result.x, float(result.fun)
    if not math.isfinite(best_value):
        raise LmptError("the data-constrained law's fit found no finite optimum: check the runs' N, D, U and losses")
    return best


def fit_base_law(
    points: Sequence[LossPoint],
    *,
    unit: LossUnit | str = LossUnit.nats,
    tie_exponents: bool = True,
    starts: int | None = None,
) -> DataConstrainedLaw:
    """Stage 1: Chinchilla's E + A/N^alpha + B/D^beta through the single-epoch runs (D = U) of `points`, alpha =
    beta when `tie_exponents` (the notebook's C4 fit ties them). `starts`: optimise from that many of `BASE_GRID`'s
    starts, those whose objective is lowest (None: all, as the notebook)."""
    once = [p for p in points if p.tokens <= p.unique * (1 + SINGLE_EPOCH)]
    least = 4 if tie_exponents else 5
    if len({(p.params, p.tokens) for p in once}) < least:
        raise LmptError(
            f"stage 1 needs single-epoch runs (D = U) at {least} or more (N, D): {len(once)} given; run more or pass "
            "base= (PAPER_LAW: the paper's C4 fit)"
        )
    params, tokens, _, log_loss = _arrays(once, LossUnit(unit))
    log_n, log_d = np.log(params), np.log(tokens)
    names = ["a", "b", "e", "alpha"] + ([] if tie_exponents else ["beta"])
    jacobian = np.zeros((3, params.size, len(names)))
    jacobian[0, :, 0] = jacobian[1, :, 1] = jacobian[2, :, 2] = 1.0
    jacobian[0, :, 3], jacobian[1, :, -1] = -log_n, -log_d

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        a, b, e, alpha, beta = theta[0], theta[1], theta[2], theta[3], theta[-1]
        terms = np.stack([a - alpha * log_n, b - beta * log_d, np.full_like(log_n, e)])
        return _huber_objective(terms, jacobian, log_loss)

    grid = np.array(list(itertools.product(*(BASE_GRID[name] for name in names))))
    a, b, e, alpha, beta = (float(v) for v in _best_start(objective, grid, starts, None)[[0, 1, 2, 3, -1]])
    return DataConstrainedLaw(E=math.exp(e), A=math.exp(a), B=math.exp(b), alpha=alpha, beta=beta)


def fit_law(
    points: Sequence[LossPoint],
    *,
    decay: Decay | str = Decay.both,
    base: DataConstrainedLaw | None = None,
    unit: LossUnit | str = LossUnit.nats,
    tie_exponents: bool = True,
    starts: int | None = None,
) -> DataConstrainedLaw:
    """The data-constrained law through `points`, as the notebook fits it: stage 1 (`fit_base_law`, unless `base`
    gives E, A, B, alpha, beta: its R stars are ignored), then, with those held, R_D* and R_N* jointly (decay=both)
    or R_D* alone with N' = N (decay=data, R_N* infinite) over every run, by the Huber loss on log L from each
    start of `STAR_GRID`. `starts`: optimise from that many starts of each stage's grid, those whose objective is
    lowest (None: all, as the notebook)."""
    decay = Decay(decay)
    if base is None:
        base = fit_base_law(points, unit=unit, tie_exponents=tie_exponents, starts=starts)
    base = replace(base, r_d_star=math.inf, r_n_star=math.inf)
    params, tokens, unique, log_loss = _arrays(points, LossUnit(unit))
    base_params = np.minimum(params, base.optimal_params(unique))
    repeats_d = np.maximum(tokens / unique - 1.0, 0.0)
    repeats_n = np.maximum(params / base_params - 1.0, 0.0)
    if not np.any(repeats_d > 0):
        raise LmptError("no run repeats its data (D > U): R_D* needs runs of more than one epoch")
    if decay is Decay.both and not np.any(repeats_n > 0):
        raise LmptError("no run has more parameters than N_opt(U): R_N* cannot be fitted; fit with decay=data")
    fitted = 2 if decay is Decay.both else 1

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        r_d, r_n = theta[0], (theta[1] if decay is Decay.both else math.inf)
        n_term = math.log(base.A) - base.alpha * np.log(_effective(base_params, repeats_n, r_n))
        d_term = math.log(base.B) - base.beta * np.log(_effective(unique, repeats_d, r_d))
        terms = np.stack([n_term, d_term, np.full_like(d_term, math.log(base.E))])
        jacobian = np.zeros((3, params.size, fitted))
        jacobian[1, :, 0] = -base.beta * _effective_slope(repeats_d, r_d)
        if decay is Decay.both:
            jacobian[0, :, 1] = -base.alpha * _effective_slope(repeats_n, r_n)
        return _huber_objective(terms, jacobian, log_loss)

    grid = np.array(list(itertools.product(STAR_GRID, repeat=fitted)))
    found = _best_start(objective, grid, starts, [R_STAR_BOUNDS] * fitted)
    return replace(base, r_d_star=float(found[0]), r_n_star=float(found[1]) if decay is Decay.both else math.inf)


def include_points(
    points: Sequence[LossPoint],
    *,
    vocab_size: int,
    unit: LossUnit | str = LossUnit.nats,
    leave_out: Mapping[str, str] | None = None,
) -> tuple[list[LossPoint], list[tuple[LossPoint, str]]]:
    """The runs the fit may use, and those it may not with the reason for each. A run is left out when its loss
    is not finite (diverged), is 0 or below (none recorded: the notebook's 0 marks a run not finished), or is at or
    above ln V nats, a uniform guess over the V pieces of the vocabulary (diverged, or not learning); and when
    `leave_out` names it (run name -> reason): the notebook's other removals are such a hand-made list, not a rule."""
    unit, hand = LossUnit(unit), leave_out or {}
    if vocab_size < 2:
        raise LmptError(f"vocab_size={vocab_size}: give the tokenizer's vocabulary size (2 or more)")
    uniform = math.log(vocab_size)
    kept, left_out = [], []
    for point, loss in zip(points, unit.to_nats(np.array([p.loss for p in points], dtype=float)), strict=True):
        if not math.isfinite(loss):
            left_out.append((point, f"diverged: its loss is {point.loss}"))
        elif loss <= 0:
            left_out.append((point, "no loss recorded (0 or below): not finished"))
        elif loss >= uniform:
            reason = f"diverged: {loss:.3f} nats is at or above ln {vocab_size} = {uniform:.3f}, a uniform guess"
            left_out.append((point, reason))
        elif point.name in hand:
            left_out.append((point, f"left out by hand: {hand[point.name]}"))
        else:
            kept.append(point)
    return kept, left_out


@dataclass(frozen=True)
class StarIntervals:
    """The bootstrap's intervals of R_D* and R_N* (None for R_N* when only data decays), at `level`."""

    r_d_star: tuple[float, float]
    """R_D*'s interval (low, high)."""
    r_n_star: tuple[float, float] | None
    """R_N*'s interval, None when only data decays."""
    level: float
    """The confidence level (0.95: a 95% interval)."""
    resamples: int
    """How many resamples the percentiles are of."""


def bootstrap_stars(
    points: Sequence[LossPoint],
    *,
    decay: Decay | str = Decay.both,
    base: DataConstrainedLaw | None = None,
    unit: LossUnit | str = LossUnit.nats,
    tie_exponents: bool = True,
    level: float = 0.95,
    resamples: int = 999,
    seed: int = 0,
    starts: int | None = 1,
) -> StarIntervals:
    """Percentile intervals of R_D* and R_N* (scipy.stats.bootstrap): in each resample every cell's seeds (runs of
    one objective, N, D and U) are drawn again with replacement and `fit_law` is redone on them, stage 1 included
    when no `base` is given; a cell with one seed stays as it is. Deterministic in `seed`. `starts`: each refit's
    starts per stage, the lowest of its grid (1 by default: a resample's optimum lies where the data's does)."""
    from scipy.stats import bootstrap

    cells: dict[tuple[str, float, float, float], list[LossPoint]] = {}
    for point in points:
        cells.setdefault(point.cell, []).append(point)
    drawn = [runs for runs in cells.values() if len(runs) >= 2]
    fixed = [runs[0] for runs in cells.values() if len(runs) == 1]
    if not drawn:
        raise LmptError("the bootstrap draws seeds within cells: run at least two seeds of some (N, D, U)")
    decay = Decay(decay)

    def statistic(*indices: np.ndarray) -> np.ndarray:
        sample = fixed + [runs[i] for runs, chosen in zip(drawn, indices, strict=True) for i in chosen]
        law = fit_law(sample, decay=decay, base=base, unit=unit, tie_exponents=tie_exponents, starts=starts)
        return np.array([law.r_d_star, law.r_n_star] if decay is Decay.both else [law.r_d_star])

    result = bootstrap(
        [np.arange(len(runs)) for runs in drawn],
        statistic,
        n_resamples=resamples,
        vectorized=False,
        confidence_level=level,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    low, high = np.atleast_1d(result.confidence_interval.low), np.atleast_1d(result.confidence_interval.high)
    r_n = (float(low[1]), float(high[1])) if decay is Decay.both else None
    return StarIntervals((float(low[0]), float(high[0])), r_n, level, resamples)
