"""The one exception type that reaches the user as a single line and exit code 2."""


class LmptError(Exception):
    """A problem with the user's input or environment: the message names it and says what to do."""

    exit_code = 2
