"""What a reproduction may conclude (principle 17): for each named claim, one verdict from a fixed vocabulary, read off
the evidence by one rule, beside a table of the conditions the claim depends on.

The rule, from the evidence's outcome and the conditions the grid meets:

| the figures | every condition met | a condition missed |
| --- | --- | --- |
| show the claim | reproduced | reproduced, at a smaller scale than the paper's |
| show its opposite | not reproduced | inconclusive at this scale, naming what is missed |
| cannot tell | inconclusive at this scale: more seeds or runs | inconclusive at this scale, naming what is missed |
| are missing | no verdict: the missing runs are named | the same |

"Show the claim": the interval on the paper's side; "its opposite": the interval excludes the claim; "cannot tell": an
interval across both, or no interval (one seed).

A claim whose figures contradict it where the grid misses a condition the claim depends on is not refuted: the paper
never claimed it there. A claim shown where the grid misses a condition is shown all the same. A missing interval
(one seed) is never read as evidence either way."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

from lmpt.report.markdown import markdown_table


class Verdict(str, Enum):
    """The fixed vocabulary of a claim's verdict."""

    reproduced = "reproduced"
    not_reproduced = "not reproduced"
    inconclusive = "inconclusive at this scale"

    def __str__(self) -> str:
        return str(self.value)


class Evidence(str, Enum):
    """What a claim's figures show, before the conditions are read."""

    shows = "shows the claim"
    contradicts = "shows its opposite"
    undecided = "cannot tell"
    missing = "runs missing"


@dataclass(frozen=True)
class Condition:
    """One condition a claim depends on: the paper's value beside the grid's, and whether the grid meets what the
    claim needs (None: stated for the reader, not needed by the claim)."""

    name: str
    paper: str
    grid: str
    met: bool | None = None
    why: str = ""
    """What follows from the grid's value (one phrase), shown beside it."""


@dataclass(frozen=True)
class ClaimVerdict:
    """One named claim's verdict, with the figure it rests on and the reasons the rule gave."""

    claim: str
    verdict: Verdict | None
    """None: no verdict, the runs the claim needs are missing."""
    figure: str
    """lmpt's figure for the claim, with its interval, in a few words."""
    reasons: tuple[str, ...] = field(default_factory=tuple)

    @property
    def word(self) -> str:
        return str(self.verdict) if self.verdict is not None else "no verdict"

    def sentence(self) -> str:
        """'CLAIM: VERDICT (FIGURE; REASONS)'."""
        detail = "; ".join((self.figure, *self.reasons)) if self.figure else "; ".join(self.reasons)
        return f"{self.claim}: **{self.word}**" + (f" ({detail})" if detail else "")


def judge(claim: str, evidence: Evidence, figure: str, conditions: Sequence[Condition], why: str = "") -> ClaimVerdict:
    """The verdict on `claim` by the rule of this module's table; `why` says what the figures show in words (the
    interval, the missing runs)."""
    missed = [c for c in conditions if c.met is False]
    missed_text = "the grid misses " + ", ".join(f"{c.name} ({c.grid} against {c.paper})" for c in missed)
    reasons = [why] if why else []
    if evidence is Evidence.missing:
        return ClaimVerdict(claim, None, figure, tuple(reasons))
    if evidence is Evidence.shows:
        if missed:
            reasons.append("shown although " + missed_text)
        return ClaimVerdict(claim, Verdict.reproduced, figure, tuple(reasons))
    if missed:
        return ClaimVerdict(claim, Verdict.inconclusive, figure, (*reasons, missed_text))
    if evidence is Evidence.contradicts:
        return ClaimVerdict(claim, Verdict.not_reproduced, figure, tuple(reasons))
    return ClaimVerdict(claim, Verdict.inconclusive, figure, (*reasons, "more seeds or runs could tell"))


def within_margin(low: float, high: float, margin: float) -> Evidence:
    """Evidence for a claim of no difference (|difference| within `margin`) from the difference's interval: inside
    the margin shows it, wholly outside it shows the opposite, else undecided; no interval (NaN ends) is undecided."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return Evidence.undecided
    if -margin <= low and high <= margin:
        return Evidence.shows
    if low > margin or high < -margin:
        return Evidence.contradicts
    return Evidence.undecided


def below(low: float, high: float, limit: float = 0.0) -> Evidence:
    """Evidence for a claim that a quantity is below `limit` (a loss lower, a gap shrinking) from its interval."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return Evidence.undecided
    if high < limit:
        return Evidence.shows
    if low > limit:
        return Evidence.contradicts
    return Evidence.undecided


def inside(low: float, high: float, value: float) -> Evidence:
    """Evidence for a claim that a fitted constant equals the paper's `value`: the interval holding it shows the
    claim, one excluding it shows the opposite; no interval is undecided."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return Evidence.undecided
    return Evidence.shows if low <= value <= high else Evidence.contradicts


def combined(evidence: Sequence[Evidence]) -> Evidence:
    """One claim's evidence from its cells (a claim made at every size and budget): its opposite where any cell shows
    it, the claim where every cell shows it, else undecided; missing without cells."""
    if not evidence:
        return Evidence.missing
    if Evidence.contradicts in evidence:
        return Evidence.contradicts
    if all(e is Evidence.shows for e in evidence):
        return Evidence.shows
    return Evidence.undecided


def summary(claims: Sequence[ClaimVerdict]) -> str:
    """The document's and the README's verdict: one verdict when every claim has it, else each claim with its own."""
    words = {c.word for c in claims}
    if len(words) == 1 and claims:
        return f"{claims[0].word} ({'; '.join(c.claim for c in claims)})"
    return "; ".join(f"{c.claim}: {c.word}" for c in claims)


def conditions_table(conditions: Sequence[Condition]) -> str:
    """The document's "Conditions" table: each condition, the paper's value, the grid's, and whether it is met."""
    marks = {True: "met", False: "**missed**", None: "stated"}
    rows = [[c.name, c.paper, c.grid, marks[c.met] + (f": {c.why}" if c.why else "")] for c in conditions]
    return "\n".join(markdown_table(["condition", "the paper", "this grid", "for the claim"], rows))


def claims_list(claims: Sequence[ClaimVerdict]) -> str:
    """The verdicts as a markdown list, one named claim a line."""
    return "\n".join(f"- {c.sentence()}" for c in claims)
