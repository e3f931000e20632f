"""The one error type the CLI turns into a one-line message and exit code 2."""


class UsageError(Exception):
    """Bad input from the user: an unknown name, a bad value, an unusable file."""
