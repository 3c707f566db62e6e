"""The one exception type the CLI turns into a one-line message and exit code 2."""


class UsageError(Exception):
    """Bad input from the user: the message names the problem and the way out."""
