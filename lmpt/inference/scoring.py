"""The text lmpt-eval scores, read as training reads it. How it is scored is the run's objective's own measure
(lmpt.objectives.measure: Objective.measure), never a switch on the architecture here."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Text:
    tokens: list[int]
    """Every document's sentences' ids, each document followed by eos (the training stream)."""
    bytes: int
    """UTF-8 bytes of the sentences as handed to the tokenizer (whitespace between them not counted)."""
    documents: int
