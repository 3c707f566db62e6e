"""UsageError, which the CLI turns into one line and exit code 2, and one-line reasons."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, or its type name when it has none."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class UsageError(Exception):
    """Bad input from the user: the message names the problem and the way out."""
