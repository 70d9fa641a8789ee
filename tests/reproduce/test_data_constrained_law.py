"""The data-constrained law: the published coefficients give the README's losses, the notebook's two stages recover
known constants, the one-term fit shows the paper's confound, and the inclusion rule and bootstrap say what they do."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from lmpt.errors import LmptError
from lmpt.reproduce.data_constrained_law import (
    PAPER_LAW,
    DataConstrainedLaw,
    LossPoint,
    bootstrap_stars,
    fit_base_law,
    fit_law,
    include_points,
)

EPOCHS = (1, 2, 4, 8, 16, 32, 64)
CHINCHILLA = replace(PAPER_LAW, r_d_star=math.inf, r_n_star=math.inf)
"""The paper's stage 1 (its C4 coefficients), held as the notebook holds it."""


def runs(law: DataConstrainedLaw, ladder: tuple[float, ...], uniques: tuple[float, ...], seeds: int = 2) -> list:
    """Every (N, U, epochs) cell with `seeds` runs, the law's loss times a noise of 0.2%."""
    rng = np.random.default_rng(7)
    return [
        LossPoint(n, u * e, u, float(law.predict(n, u * e, u)) * math.exp(rng.normal(0, 0.002)), seed=s)
        for n in ladder
        for u in uniques
        for e in EPOCHS
        for s in range(seeds)
    ]


def test_the_published_law_gives_the_readmes_losses_and_a_hand_computed_one() -> None:
    # the datablations README's two models of Figure 1 (right)
    assert PAPER_LAW.predict(6.34e9, 242e9, 25e9) == pytest.approx(2.2256440889984477, rel=1e-12)
    assert PAPER_LAW.predict(8.67e9, 178e9, 25e9) == pytest.approx(2.2269634075087867, rel=1e-12)
    # N = 1e9 on D = 4e10 tokens of U = 1e10: R_D = 3; N_opt(U) = G^2 U (alpha = beta), so R_N = N / N_opt - 1
    e, a, b, alpha = 0.6254804, 6.255414, 7.3049974, 0.3526596
    n_opt = (math.exp(a) / math.exp(b)) ** (1 / alpha) * 1e10
    assert n_opt == pytest.approx(1e10 / 19.61, rel=1e-3)
    d_eff = 1e10 * (1 + 15.387756 * (1 - math.exp(-3 / 15.387756)))
    n_eff = n_opt * (1 + 5.309743 * (1 - math.exp(-(1e9 / n_opt - 1) / 5.309743)))
    by_hand = math.exp(e) + math.exp(a) / n_eff**alpha + math.exp(b) / d_eff**alpha
    predicted = PAPER_LAW.predict(np.array([1e9, 1e9]), np.array([4e10, 1e10]), 1e10)
    assert predicted[0] == pytest.approx(by_hand, rel=1e-12)
    # one epoch at N below N_opt(U): nothing decays, Chinchilla's law
    assert predicted[1] > predicted[0] and PAPER_LAW.predict(1e8, 1e10, 1e10) == pytest.approx(
        CHINCHILLA.predict(1e8, 1e10, 1e10), rel=1e-12
    )
    with pytest.raises(LmptError, match="more unique tokens than training tokens"):
        PAPER_LAW.predict(1e8, 1e9, 2e9)


@pytest.mark.parametrize("stars", [(15.387756, 5.309743), (6.0, 2.0)])
def test_the_second_stage_recovers_both_constants_from_runs_the_law_made(stars: tuple[float, float]) -> None:
    truth = replace(PAPER_LAW, r_d_star=stars[0], r_n_star=stars[1])
    points = runs(truth, (2e6, 8e6, 32e6), (4e7, 1.6e8, 6.4e8))
    fitted = fit_law(points, base=CHINCHILLA)
    assert fitted.r_d_star == pytest.approx(stars[0], rel=0.1)
    assert fitted.r_n_star == pytest.approx(stars[1], rel=0.1)
    # the same runs in bits per token give the same fit
    in_bits = [replace(p, loss=p.loss / math.log(2)) for p in points]
    assert fit_law(in_bits, base=CHINCHILLA, unit="bits").r_d_star == pytest.approx(fitted.r_d_star, rel=1e-6)


def test_the_first_stage_recovers_chinchillas_law_from_single_epoch_runs() -> None:
    n_opt = float(PAPER_LAW.optimal_params(1e9))
    points = [
        LossPoint(n, d, d, float(CHINCHILLA.predict(n, d, d)))
        for n in (n_opt / 4, n_opt, 4 * n_opt)
        for d in (2.5e8, 1e9, 4e9)
    ]
    base = fit_base_law(points, starts=2)
    assert base.alpha == pytest.approx(PAPER_LAW.alpha, rel=0.02) and base.beta == base.alpha
    assert base.predict(1e8, 1e10, 1e10) == pytest.approx(CHINCHILLA.predict(1e8, 1e10, 1e10), rel=1e-3)
    assert math.isinf(base.r_d_star) and math.isinf(base.r_n_star)
    with pytest.raises(LmptError, match="stage 1 needs single-epoch runs"):
        fit_law([p for p in points if p.params == n_opt])


def test_decaying_data_alone_lowers_r_d_star_when_one_oversized_model_carries_the_excess() -> None:
    """One N, 4 to 63 times N_opt(U): the excess-parameter penalty, a constant per U, is all the data-only fit can
    put into D' (the paper's 15.39 against 2.92)."""
    points = runs(PAPER_LAW, (64e6,), (2e7, 8e7, 3.2e8))
    assert fit_law(points, base=CHINCHILLA).r_d_star == pytest.approx(15.39, rel=0.1)
    data_only = fit_law(points, base=CHINCHILLA, decay="data")
    assert data_only.r_d_star < 0.5 * 15.39 and math.isinf(data_only.r_n_star)
    with pytest.raises(LmptError, match="R_D\\* needs runs of more than one epoch"):
        fit_law([p for p in points if p.tokens == p.unique], base=CHINCHILLA)
    with pytest.raises(LmptError, match="fit with decay=data"):
        fit_law([replace(p, params=1e5) for p in points], base=CHINCHILLA)


def test_the_inclusion_rule_leaves_out_diverged_and_unfinished_runs_with_reasons() -> None:
    ok, nan, above, zero, named = (
        LossPoint(1e6, 1e7, 1e7, 5.0, name="ok"),
        LossPoint(1e6, 1e7, 1e7, math.nan, name="nan"),
        LossPoint(1e6, 1e7, 1e7, 8.0, name="above"),  # ln 2048 = 7.62
        LossPoint(1e6, 1e7, 1e7, 0.0, name="zero"),
        LossPoint(1e6, 1e7, 1e7, 5.0, name="named"),
    )
    kept, left_out = include_points([ok, nan, above, zero, named], vocab_size=2048, leave_out={"named": "overfit"})
    assert kept == [ok]
    reasons = {point.name: reason for point, reason in left_out}
    assert reasons["nan"] == "diverged: its loss is nan"
    assert reasons["above"].startswith("diverged: 8.000 nats is at or above ln 2048 = 7.625")
    assert reasons["zero"].startswith("no loss recorded") and reasons["named"] == "left out by hand: overfit"
    # in bits: 10 bits is 6.93 nats (kept), 11.5 is 7.97 (above ln 2048)
    bits = [replace(ok, loss=10.0), replace(ok, loss=11.5, name="high")]
    kept, left_out = include_points(bits, vocab_size=2048, unit="bits")
    assert kept == bits[:1] and [p.name for p, _ in left_out] == ["high"]


def test_the_bootstrap_over_seeds_brackets_the_fit_and_repeats_itself() -> None:
    points = runs(PAPER_LAW, (2e6, 32e6), (4e7, 6.4e8), seeds=3)
    fitted = fit_law(points, base=CHINCHILLA)
    intervals = bootstrap_stars(points, base=CHINCHILLA, resamples=19, seed=3)
    assert intervals.r_d_star[0] <= fitted.r_d_star <= intervals.r_d_star[1]
    assert intervals.r_n_star is not None and intervals.r_n_star[0] <= fitted.r_n_star <= intervals.r_n_star[1]
    assert intervals.r_d_star[1] - intervals.r_d_star[0] < 0.2 * fitted.r_d_star
    data_only = bootstrap_stars(points, base=CHINCHILLA, decay="data", resamples=9, seed=3)
    assert data_only.r_n_star is None
    assert data_only == bootstrap_stars(points, base=CHINCHILLA, decay="data", resamples=9, seed=3)
    with pytest.raises(LmptError, match="at least two seeds"):
        bootstrap_stars([p for p in points if p.seed == 0], base=CHINCHILLA)
