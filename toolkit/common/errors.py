"""UsageError (bad input) and RunError (a fault on the way), which the CLI turns into one line
and exit code 2 and 1; and one-line reasons."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, or its type name when it has none."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class UsageError(Exception):
    """Bad input from the user: the message names the problem and the way out."""


class RunError(Exception):
    """A fault while a command ran (a full disk, a lost process): the message names it and
    the way out (e.g. the command that resumes); the CLI prints it in one line, exit code 1."""
