"""The errors the CLI turns into one line on stderr and an exit code (docs/usage.md: exit codes)."""

EXIT_OK = 0
EXIT_REGRESSION = 1     # diff: a regression resolved beyond the threshold
EXIT_USAGE = 2          # bad input
EXIT_NO_RESULT = 3      # compare/case/check: no cell produced a result (or, with --fail-on-error, one failed)
EXIT_STORE = 4          # the store or an output file could not be read or written (disk full, damaged, ...)
EXIT_UNRESOLVED = 5     # gate: no regression resolved, but the time change could not be resolved either
EXIT_INTERRUPTED = 130  # Ctrl-C: what finished is kept


# The signals that end a run as Ctrl-C does (what finished is kept); a run they end exits 128 + the
# signal (SIGTERM 143, SIGHUP 129), Ctrl-C 130.
STOP_SIGNAL_NAMES = {2: "SIGINT", 1: "SIGHUP", 15: "SIGTERM"}


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP (a closed terminal or ssh session), handled as Ctrl-C is: the run in
    progress keeps what finished, the measured process tree is ended, temporary files are removed."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def stop_signal(e: BaseException) -> int:
    """The signal behind a KeyboardInterrupt: SIGINT (2) for Ctrl-C, else Terminated's."""
    return getattr(e, "signum", 2)


def interrupted_exit(signum: int) -> int:
    return EXIT_INTERRUPTED if signum == 2 else 128 + signum


class UsageError(Exception):
    """Bad input from the user: an unknown name, a bad value, an unusable file."""
    exit_code = EXIT_USAGE


class StoreError(Exception):
    """The store or an output file failed: full disk, damaged database, no permission."""
    exit_code = EXIT_STORE
