"""What the refusal of a tokenizer file tells the user to do: fix the setting that named the file, or, for the copy a
run directory holds, know that the run directory is damaged (no setting of the command can fix that)."""

from __future__ import annotations

RUN_FILE = "the run directory"
"""`what` for the tokenizer file a run directory holds (lmpt-eval, -generate, -fill, -export, resume)."""


def remedy(what: str, setting_advice: str | None = None) -> str:
    """The clause ending the refusal of a tokenizer file: `setting_advice` (default `fix {what}`) when `what` is the
    setting that named the file; for a run's own file, that the run directory is damaged."""
    if what == RUN_FILE:
        return (
            "the run directory is damaged (its tokenizer file is not the one it was trained with): "
            "restore the file from a copy of the run, or train the run again"
        )
    return setting_advice or f"fix {what}"
