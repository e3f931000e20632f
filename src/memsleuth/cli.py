"""The `memsleuth` command: builds the parser from the command modules and dispatches.

Exit codes (docs/usage.md): 0 ok; 1 diff resolved a regression; 2 bad input; 3 no cell produced a
result (or, with --fail-on-error, a run failed); 4 the store or an output file failed; 130
interrupted. An error is one line on stderr, never a traceback.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys

from memsleuth import __version__
from memsleuth.commands import COMMANDS, TAKES_COMMAND, module
from memsleuth.errors import (
    EXIT_STORE,
    EXIT_USAGE,
    STOP_SIGNAL_NAMES,
    StoreError,
    Terminated,
    UsageError,
    interrupted_exit,
    stop_signal,
)
from memsleuth.textsafe import visible


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser for this command line: every command by name, and the options of the one that
    argv names (the first word that is not an option); None: every command's options."""
    wanted = next((a for a in argv if not a.startswith("-")), None) if argv is not None else None
    parser = _Parser(prog="memsleuth", description="Measure memory behaviour the right way, and explain it.")
    parser.add_argument("--version", action="version", version=f"memsleuth {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    for name, line in COMMANDS:
        p = sub.add_parser(name, help=line)
        if argv is None or name == wanted:
            module(name).add_arguments(p)
    return parser


# Output that is not a terminal (a file, a CI log, `| less`) with no COLUMNS is this wide: the
# widest tables (check's whole process, compare's cells) fit, and a line stays short enough for a
# log viewer. COLUMNS, when set, is honoured either way (docs/usage.md: "Width").
PIPED_WIDTH = 120
MIN_WIDTH = 40


def output_width(is_terminal: bool, columns: str | None) -> int | None:
    """The report's width: COLUMNS when it is a number of at least MIN_WIDTH; else the terminal's
    own (None: rich asks it), or PIPED_WIDTH when the output is not a terminal."""
    if columns and columns.strip().isdigit() and int(columns) >= MIN_WIDTH:
        return int(columns)
    return None if is_terminal else PIPED_WIDTH


def _on_stop(signum, frame):
    raise Terminated(signum)


# The output files a command may be asked to write: two of them naming one file would leave one.
OUTPUT_OPTIONS = (("md", "--md"), ("html", "--html"), ("json", "--json"), ("pprof", "--pprof"),
                  ("speedscope", "--speedscope"), ("junit", "--junit"))


def distinct_outputs(args) -> None:
    """Refuses, before anything runs, two output options that name the same file."""
    seen: dict[str, str] = {}
    for attr, flag in OUTPUT_OPTIONS:
        path = getattr(args, attr, None)
        if not path:
            continue
        key = os.path.realpath(path)
        if key in seen:
            raise UsageError(f"{seen[key]} and {flag} name the same file ({path}): give each its own")
        seen[key] = flag


def _console():
    """rich's console, but a reader of stdout that leaves (`| head`) raises BrokenPipeError, which
    the commands handle (the files asked for are still written, exit 0), not rich's SystemExit(1).
    Made once the command line parsed: `--help` and a usage error never import rich (a third of the
    CLI's start)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError

    return _Console(width=output_width(sys.stdout.isatty(), os.environ.get("COLUMNS")))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, _on_stop)
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:     # under nohup it stays ignored
        signal.signal(signal.SIGHUP, _on_stop)
    command = None
    if "--" in argv:
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1:]
    try:
        args = build_parser(argv).parse_args(argv)
        if args.command is None:
            build_parser([]).print_help()
            return EXIT_USAGE
        if command is not None and args.command not in TAKES_COMMAND:
            raise UsageError("a command after -- is only taken by `memsleuth compare`, `memsleuth check`, "
                             "`memsleuth gate` and `memsleuth fleet submit`")
        if command is not None and not command:
            raise UsageError("no command after --")
        distinct_outputs(args)
        # A command that checks a command line of its own (fleet submit) gets the parser handed
        # down rather than importing the CLI back (no import circle).
        args.build_parser = build_parser
        return module(args.command).run(args, command, _console())
    except (UsageError, StoreError) as e:
        print(f"memsleuth: error: {visible(str(e))}", file=sys.stderr)
        return e.exit_code
    except Terminated as e:
        print(f"memsleuth: terminated ({STOP_SIGNAL_NAMES.get(e.signum, e.signum)}): what finished is kept",
              file=sys.stderr)
        return interrupted_exit(e.signum)
    except KeyboardInterrupt as e:
        print("memsleuth: interrupted", file=sys.stderr)
        return interrupted_exit(stop_signal(e))
    except BrokenPipeError:   # the reader of stdout left (`| head`): what was asked to be written was written
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # no second error at exit's flush
        except OSError:
            pass
        return 0
    except OSError as e:
        # A file the checks above did not foresee (permissions on a parent folder, a full disk
        # while printing): still one line.
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        print(f"memsleuth: error: {visible(where)}{visible(e.strerror or e)}", file=sys.stderr)
        return EXIT_STORE
