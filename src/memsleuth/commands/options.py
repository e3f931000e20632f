"""Options shared by several commands, declared once, and the parsing of their values.

Each command module declares its own parser from these helpers; a newcomer looking for where an
option is declared finds it in its command's module or here.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import shutil
from typing import TYPE_CHECKING

from memsleuth.errors import UsageError
from memsleuth.units import parse_fraction, parse_size_bytes

if TYPE_CHECKING:
    from memsleuth.measure import plan as planning

DEFAULT_DB = "memsleuth.db"
DEFAULT_TARGET_CI = "2%"   # relative CI half-width at which a cell has enough runs
DEFAULT_MIN_REPS = 6       # the fewest runs whose order statistics give a 95% CI of the median
DEFAULT_MAX_REPS = 30      # keeps `make demo` (20 cells) within about two minutes at worst
DEFAULT_NOISE = "1%"       # differences whose CI stays within +-1% are not called
DEFAULT_TIMEOUT_S = 120.0
# The longest --timeout taken as a number (11.6 days); `--timeout none` is no limit at all.
MAX_TIMEOUT_S = 1e6


class Once(argparse.Action):
    """A single-valued option given twice is an error, not "the last one wins"."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, f"_seen_{self.dest}", False):
            raise UsageError(f"{option_string} given twice")
        setattr(namespace, f"_seen_{self.dest}", True)
        setattr(namespace, self.dest, values)


class OnceFlag(argparse.Action):
    def __init__(self, option_strings, dest, **kw):
        super().__init__(option_strings, dest, nargs=0, default=False, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, self.dest):
            raise UsageError(f"{option_string} given twice")
        setattr(namespace, self.dest, True)


def add_store(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", metavar="FILE|URL", default=DEFAULT_DB, action=Once,
                   help=f"the store: an SQLite file (default {DEFAULT_DB}) or postgresql://user:password@host/dbname")


def add_measuring(p: argparse.ArgumentParser, *, env: bool = True, reference: bool = False,
                  pprof: bool = True) -> None:
    """What every measuring command (compare, case, check) takes after its own options, in this order."""
    if env:
        add_env(p)
    add_limits(p)
    if reference:
        add_reference(p)
    add_fail_on_error(p)
    add_store(p)
    add_machine_label(p)
    add_outputs(p, pprof=pprof)


def add_report_files(p: argparse.ArgumentParser) -> None:
    """--md and --json of a report that is not a stored run (doctor, history, fleet status)."""
    p.add_argument("--md", metavar="FILE", action=Once, help="also write the report as Markdown")
    p.add_argument("--json", metavar="FILE", action=Once, help="also write what it shows as JSON")


def add_outputs(p: argparse.ArgumentParser, *, json: bool = True, pprof: bool = False) -> None:
    p.add_argument("--md", metavar="FILE", action=Once, help="also write the report as Markdown")
    p.add_argument("--html", metavar="FILE", action=Once,
                   help="also write the report as one self-contained HTML file with plots (works offline)")
    if json:
        p.add_argument("--json", metavar="FILE", action=Once, help="also export the run as JSON (docs/json-schema.md)")
    if pprof:
        p.add_argument("--pprof", metavar="FILE", action=Once,
                       help="also write the sampled stacks as a gzipped pprof profile (go tool pprof, Pyroscope): "
                            "one sample type per stack set")
        p.add_argument("--speedscope", metavar="FILE", action=Once,
                       help="also write the sampled stacks in speedscope's own format: one profile per stack set "
                            "(speedscope shows one sample type of a pprof profile)")


def add_limits(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timeout", metavar="SECONDS", default=str(DEFAULT_TIMEOUT_S), action=Once,
                   help=f"per run; past it the run's process tree is killed and recorded as TIMEOUT "
                        f"(default {DEFAULT_TIMEOUT_S:g}; 'none' for no limit)")
    p.add_argument("--mem-limit", metavar="SIZE", action=Once,
                   help="resident-memory cap per run for the whole process tree, like 2G; past it: OOM")


def add_machine_label(p: argparse.ArgumentParser) -> None:
    p.add_argument("--machine-label", metavar="NAME", action=Once,
                   help="name this machine in the stored run (default: its host name; `show RUN RUN` sets runs from "
                        "different machines side by side)")


def apply_machine_label(args) -> None:
    """--machine-label reaches machine.info through the environment, as a fleet task's does."""
    import os
    import re
    value = getattr(args, "machine_label", None)
    source = "--machine-label"
    if value is None:
        # The same rule for a label set in the environment (a fleet task's, or the user's own).
        value, source = os.environ.get("MEMSLEUTH_MACHINE_LABEL"), "MEMSLEUTH_MACHINE_LABEL"
        if not value:
            return
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,63}", value):
        raise UsageError(f"bad {source} {value!r}: letters, digits and . _ : @ + -, at most 64")
    os.environ["MEMSLEUTH_MACHINE_LABEL"] = value


def add_reference(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-reference", action=OnceFlag,
                   help="leave out the reference cell (a small fixed glibc loop run once per round, which `diff` "
                        "divides by to cancel a shift of the whole machine between two runs)")


def with_reference(p, args):
    """The plan with the reference cell, unless --no-reference."""
    import dataclasses
    from memsleuth.measure import plan as planning
    return p if getattr(args, "no_reference", False) else dataclasses.replace(p, reference=planning.reference_cell())


def add_env(p: argparse.ArgumentParser) -> None:
    p.add_argument("--env", metavar="KEY=VALUE", action="append",
                   help="set in every measured process (tunables, allocator options); repeatable")


def add_fail_on_error(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fail-on-error", action=OnceFlag,
                   help="exit 3 when any run crashed, ran out of memory, timed out or failed to preload "
                        "(without it, exit 3 only when no cell produced a result)")


# ---- values ----

def pid(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise UsageError(f"--pid must be a process id (a positive integer), got {text!r}") from None
    if not 0 < v <= 1 << 22:
        raise UsageError(f"--pid {text}: not a process id")
    return v


def duration(text: str, option: str = "--duration") -> float:
    """A window in seconds: '30', '30s', '2m'; errors name `option`."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(s|m)?\s*", text.lower())
    if m is None:
        raise UsageError(f"{option} must be a number of seconds (30, 30s, 2m), got {text!r}")
    v = float(m.group(1)) * (60.0 if m.group(2) == "m" else 1.0)
    if not math.isfinite(v) or not v > 0 or v > MAX_TIMEOUT_S:
        raise UsageError(f"{option} must be positive and at most {MAX_TIMEOUT_S:g} s, got {text!r}")
    return v


def timeout(text: str) -> float | None:
    if text.strip().lower() in ("none", "no", "off"):
        return None
    try:
        v = float(text)
    except ValueError:
        raise UsageError(f"--timeout must be a number of seconds or 'none', got {text!r}") from None
    if not v > 0:
        raise UsageError(f"--timeout must be positive, got {text!r}")
    if not math.isfinite(v) or v > MAX_TIMEOUT_S:
        raise UsageError(f"--timeout {text}: longer than {MAX_TIMEOUT_S:g} s (11.6 days); "
                         "use --timeout none for no limit")
    return v


def mem_limit(text: str | None) -> int | None:
    return parse_size_bytes(text) if text else None


def count(text: str, what: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise UsageError(f"{what} must be an integer, got {text!r}") from None
    if v < 1:
        raise UsageError(f"{what} must be at least 1, got {text!r}")
    if v > 100_000:
        raise UsageError(f"{what} must be at most 100000, got {text!r}")
    return v


def warmup(text: str | None) -> int:
    """--warmup: unmeasured runs of each cell before the rounds (default 1; 0 runs none)."""
    if text is None:
        return 1
    try:
        v = int(text)
    except ValueError:
        raise UsageError(f"--warmup must be an integer, got {text!r}") from None
    if not 0 <= v <= 100:
        raise UsageError(f"--warmup must be 0 to 100, got {text!r}")
    return v


def rounds(args) -> planning.Rounds:
    from memsleuth.measure import plan as planning
    if args.reps is not None:
        if args.min_reps is not None or args.max_reps is not None or args.target_ci is not None:
            raise UsageError("--reps fixes the number of rounds: leave out --target-ci/--min-reps/--max-reps")
        return planning.Rounds.fixed(count(args.reps, "--reps"))
    hi = count(args.max_reps, "--max-reps") if args.max_reps else None
    # An explicit --max-reps below the default minimum lowers the minimum with it.
    lo = count(args.min_reps, "--min-reps") if args.min_reps else min(DEFAULT_MIN_REPS, hi or DEFAULT_MIN_REPS)
    hi = hi if hi is not None else max(DEFAULT_MAX_REPS, lo)
    if hi < lo:
        raise UsageError(f"--max-reps ({hi}) must not be below --min-reps ({lo})")
    return planning.Rounds(lo, hi, parse_fraction(args.target_ci or DEFAULT_TARGET_CI, "--target-ci"))


def env(args) -> dict[str, str]:
    from memsleuth.measure import plan as planning
    return planning.parse_env_options(getattr(args, "env", None) or [])


def writable_output(path: str | None, what: str) -> None:
    """Refuses an output path that cannot be written, before anything runs."""
    if path is None:
        return
    from pathlib import Path
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    from memsleuth.report.output import unsafe_destination
    why = unsafe_destination(path)
    if why:
        raise UsageError(f"{what} {path}: {why}")
    try:
        if p.is_dir():
            raise UsageError(f"{what} {path}: is a directory")
        if not parent.is_dir() or not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
            raise UsageError(f"{what} {path}: cannot write there")
    except OSError as e:
        raise UsageError(f"{what} {path}: cannot write there ({e.strerror})") from None


def check_command(command: list[str]) -> None:
    prog = command[0]
    if os.sep in prog:
        if not os.path.isfile(prog) or not os.access(prog, os.X_OK):
            raise UsageError(f"command {prog}: not an executable file")
    elif shutil.which(prog) is None:
        raise UsageError(f"command {prog}: not found in PATH")


def run_id(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise UsageError(f"run must be a number, got {text!r}") from None
    if v < 1 or v >= 1 << 63:
        raise UsageError(f"run must be a positive number below 2^63, got {text!r}")
    return v


# The command's standard input. memsleuth runs a command several times (measured runs, the explaining
# run, --try's rounds), and each run must read the same input from its start: a regular file on
# memsleuth's stdin (`< FILE`) is opened afresh by each run. A pipe cannot be read again, and reading
# it whole first would take what a shell loop around memsleuth meant for its next lines: where one
# holds data, stderr says that the command reads /dev/null and how to give it the input. Before,
# every run read /dev/null and nothing said so: `cat nums | memsleuth check -- sort -n` measured sort
# of nothing (1 ms).
def command_input() -> str | None:
    """The file each run of the command reads as its standard input (said on stderr), or None:
    /dev/null (a terminal, /dev/null itself, an empty file, or a pipe, said on stderr where it holds
    data)."""
    import select
    import stat
    import sys
    from memsleuth.units import fmt_bytes
    try:
        st = os.fstat(0)
    except OSError:
        return None
    if os.isatty(0):
        return None
    if stat.S_ISREG(st.st_mode) and st.st_size:
        from memsleuth.textsafe import visible
        try:
            name = visible(os.readlink("/proc/self/fd/0"))     # a name of the user's: control characters escaped
        except OSError:
            name = "a file"
        print(f"memsleuth: the command's standard input is {name} ({fmt_bytes(st.st_size)}), read from its start by "
              "each run", file=sys.stderr, flush=True)
        return f"/proc/{os.getpid()}/fd/0"
    if (stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode)) and select.select([0], [], [], 0)[0]:
        print("memsleuth: stdin is a pipe, which the command's several runs cannot each read: its standard input is "
              "/dev/null; to give it input, redirect it from a file (memsleuth check -- CMD < FILE)",
              file=sys.stderr, flush=True)
    return None
