"""The errors the CLI turns into one line on stderr and an exit code (README: exit codes)."""

EXIT_OK = 0
EXIT_REGRESSION = 1     # diff: a regression resolved beyond the threshold
EXIT_USAGE = 2          # bad input
EXIT_NO_RESULT = 3      # compare/case/check: no cell produced a result (or, with --fail-on-error, one failed)
EXIT_STORE = 4          # the store or an output file could not be read or written (disk full, damaged, ...)
EXIT_UNRESOLVED = 5     # gate: no regression resolved, but the time change could not be resolved either
EXIT_INTERRUPTED = 130  # Ctrl-C: what finished is kept


class UsageError(Exception):
    """Bad input from the user: an unknown name, a bad value, an unusable file."""
    exit_code = EXIT_USAGE


class StoreError(Exception):
    """The store or an output file failed: full disk, damaged database, no permission."""
    exit_code = EXIT_STORE
