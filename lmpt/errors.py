"""The exception type that reaches the user as a single line and exit code 2, and its kind a small text raises."""


class LmptError(Exception):
    """A problem with the user's input or environment: the message names it and says what to do."""

    exit_code = 2


class SmallTextError(LmptError):
    """A refusal a small text causes (too few sentences to hold out, a vocabulary larger than it supports, fewer
    tokens than a window): lmpt.data.small_text then says every such problem at once."""
