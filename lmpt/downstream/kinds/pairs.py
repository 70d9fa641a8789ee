"""Minimal pairs, a zero-shot kind (BLiMP's format): `{"sentence_good", "sentence_bad"}` records, optional "field" and
"UID" (lmpt.downstream.zero_shot_files), right when the acceptable sentence scores higher (lmpt.downstream.likelihood);
reported overall, on the pairs of equal token length, per field and per paradigm, beside chance and the length
baseline."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from rich.table import Table

from lmpt.console import print_whole
from lmpt.downstream.figures import ACCURACY, CHANCE, EQUAL_LENGTH, LENGTH_BASELINE, PAIR_FIGURES, TIES
from lmpt.downstream.kinds.zero_shot import ZeroShotResult, ZeroShotTask
from lmpt.downstream.zero_shot_files import PAIR_FIELDS, ChoiceQuestion, MinimalPair, read_pairs

if TYPE_CHECKING:
    from lmpt.quality.decontamination import TaskItems
    from lmpt.rundir.trained import Trained


@dataclass(frozen=True)
class PairsResult(ZeroShotResult):
    kind: ClassVar[str] = "pairs"

    @classmethod
    def wrote(cls, raw: dict[str, Any]) -> bool:
        return "paradigms" in raw  # what only a minimal-pair scoring reports

    def own_intervals(self) -> dict[str, tuple[float, float]]:
        """Accuracy's interval, kept as `interval: [low, high]`."""
        interval = self.record.get("interval")
        if not isinstance(interval, list) or len(interval) < 2:
            return {}
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in interval[:2]):
            return {ACCURACY: (float(interval[0]), float(interval[1]))}
        return {}

    def own_logged(self) -> dict[str, float]:
        """PAIR_FIGURES; one with no value (no pair of equal length, say) is left out."""
        return {k: float(self.record[k]) for k in PAIR_FIGURES if self.record.get(k) is not None}

    def render_figures(self) -> None:
        """The summary, then per field and per paradigm (when there are two or more)."""
        result = self.record
        level = f"{result['bootstrap']['level']:.0%}"
        title = f"lmpt-eval task={result.get('task', '?')}: {result['objective']} {result['arch']}"
        summary = Table(title=f"{title} ({result['method']})", title_justify="left")
        _columns(summary, "pairs", level)
        _row(summary, "all", result)
        _row(summary, "equal token length", result[EQUAL_LENGTH])
        summary.add_row(CHANCE, "", f"{result[CHANCE]:.4f}", "", "")
        summary.add_row("length baseline (fewer tokens wins)", "", f"{result[LENGTH_BASELINE]:.4f}", "", "")
        print_whole(summary)
        for key, heading in (("fields", "field"), ("paradigms", "paradigm (UID)")):
            if len(result[key]) < 2:
                continue
            table = Table(title=f"per {heading}", title_justify="left")
            _columns(table, heading, level)
            for name, group in result[key].items():
                _row(table, name, group)
            print_whole(table)


def _row(table: Table, name: str, group: dict) -> None:
    ties = f"{group[TIES]:,}" if TIES in group else "-"  # a record written before ties were counted
    if group["n"] == 0:
        table.add_row(name, "0", "-", "-", ties)
        return
    low, high = group["interval"]
    table.add_row(name, f"{group['n']:,}", f"{group[ACCURACY]:.4f}", f"{low:.3f}-{high:.3f}", ties)


def _columns(table: Table, first: str, level: str) -> None:
    for name, justify in ((first, "left"), ("n", "right"), (ACCURACY, "right"), (f"{level} interval", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    table.add_column("ties (wrong)", justify="right")


@dataclass(frozen=True, kw_only=True)
class MinimalPairs(ZeroShotTask):
    kind: ClassVar[str] = "pairs"
    listing_order: ClassVar[int] = 0  # a file holding both shapes of record reads as pairs, as it always did
    result_type: ClassVar[type[ZeroShotResult]] = PairsResult
    fields: ClassVar[tuple[str, ...]] = PAIR_FIELDS
    described: ClassVar[str] = 'minimal pairs ({"sentence_good", "sentence_bad"}, optional "field" and "UID")'

    items: list[MinimalPair]

    @classmethod
    def read_items(cls, spec: str) -> list[MinimalPair]:
        return read_pairs(spec)

    def as_questions(self) -> list[ChoiceQuestion]:
        """Each pair as decoders and encoder-decoders score it: two choices after an empty context."""
        from lmpt.downstream.likelihood import pair_questions  # torch-heavy: when a task is named

        return pair_questions(list(self.items))

    def texts(self) -> TaskItems:
        """Each pair's acceptable sentence and its unacceptable twin, one text each."""
        from lmpt.quality.decontamination import TaskItems

        return TaskItems(self.name, [s for p in self.items for s in (p.good, p.bad)])

    def evaluate(self, trained: Trained) -> dict:
        from lmpt.downstream.likelihood import evaluate_pairs  # torch-heavy: when scoring only

        how = self.how
        return evaluate_pairs(trained, list(self.items), how.batch_size, how.hidden, how.within_word, self.name)
