"""The verdict rule (lmpt.reproduce.verdict) on made-up findings: each outcome of its table, the evidence read off an
interval, and the conditions table."""

from __future__ import annotations

import math

import pytest

from lmpt.reproduce.verdict import (
    Condition,
    Evidence,
    Verdict,
    below,
    conditions_table,
    inside,
    judge,
    summary,
    within_margin,
)

MET = [Condition("document length", "thousands of tokens", "3,500 tokens", True)]
MISSED = [*MET, Condition("parameters", "50M to 6.9B", "0.4M", False, "capacity is scarce")]


@pytest.mark.parametrize(
    ("evidence", "conditions", "verdict"),
    [
        (Evidence.shows, MET, Verdict.reproduced),
        (Evidence.shows, MISSED, Verdict.reproduced),
        (Evidence.contradicts, MET, Verdict.not_reproduced),
        (Evidence.contradicts, MISSED, Verdict.inconclusive),
        (Evidence.undecided, MET, Verdict.inconclusive),
        (Evidence.undecided, MISSED, Verdict.inconclusive),
        (Evidence.missing, MET, None),
    ],
)
def test_each_outcome_of_the_rule(evidence: Evidence, conditions: list[Condition], verdict: Verdict | None) -> None:
    found = judge("FIM for free", evidence, "+1.4% [+1.1%, +1.7%]", conditions, "the interval")
    assert found.verdict is verdict
    reasons = " ".join(found.reasons)
    if verdict is Verdict.inconclusive and conditions is MISSED:
        assert "the grid misses parameters (0.4M against 50M to 6.9B)" in reasons  # names what is missed
    if verdict is Verdict.inconclusive and conditions is MET:
        assert "more seeds or runs could tell" in reasons
    if verdict is Verdict.reproduced and conditions is MISSED:
        assert "shown although the grid misses parameters" in reasons
    if verdict is None:
        assert found.word == "no verdict" and "**no verdict**" in found.sentence()


def test_a_condition_only_stated_never_makes_a_claim_inconclusive() -> None:
    stated = [Condition("vocabulary", "50k", "2,048", None)]
    assert judge("c", Evidence.contradicts, "x", stated).verdict is Verdict.not_reproduced


def test_evidence_from_an_interval() -> None:
    assert within_margin(-0.01, 0.01, 0.05) is Evidence.shows
    assert within_margin(0.06, 0.09, 0.05) is Evidence.contradicts
    assert within_margin(-0.09, -0.06, 0.05) is Evidence.contradicts
    assert within_margin(0.01, 0.09, 0.05) is Evidence.undecided
    assert within_margin(math.nan, math.nan, 0.05) is Evidence.undecided  # one seed: no interval, no verdict either way
    assert below(-0.5, -0.1) is Evidence.shows and below(0.1, 0.5) is Evidence.contradicts
    assert below(-0.1, 0.1) is Evidence.undecided and below(math.nan, 1.0) is Evidence.undecided
    assert inside(10.0, 20.0, 15.39) is Evidence.shows and inside(0.3, 0.5, 15.39) is Evidence.contradicts
    assert inside(math.nan, math.nan, 15.39) is Evidence.undecided


def test_the_summary_is_one_word_or_each_named_claim_with_its_own() -> None:
    free = judge("FIM for free", Evidence.contradicts, "", MISSED)
    lower = judge("FIM loss lower", Evidence.shows, "", MET)
    assert summary([lower, lower]) == "reproduced (FIM loss lower; FIM loss lower)"
    assert summary([free, lower]) == "FIM for free: inconclusive at this scale; FIM loss lower: reproduced"
    assert "in part" not in summary([free, lower])


def test_the_conditions_table_marks_what_is_missed() -> None:
    table = conditions_table(MISSED).splitlines()
    assert table[0] == "| condition | the paper | this grid | for the claim |"
    assert table[3] == "| parameters | 50M to 6.9B | 0.4M | **missed**: capacity is scarce |"
    assert table[2].endswith("| met |")


def test_a_claim_made_at_every_cell_combines_its_cells_evidence() -> None:
    from lmpt.reproduce.verdict import combined

    assert combined([Evidence.shows, Evidence.shows]) is Evidence.shows
    assert combined([Evidence.shows, Evidence.undecided]) is Evidence.undecided
    assert combined([Evidence.undecided, Evidence.contradicts, Evidence.shows]) is Evidence.contradicts
    assert combined([]) is Evidence.missing
