"""The subcommands: one module each, declaring its parser (`add_arguments`) and its `run`.

`cli.py` only builds the parser from these and dispatches. Options shared by several commands
are declared once in `options.py`; orchestration (begin a run, run it, finish, emit) is
`memsleuth.session`. Each module is imported only when its command runs (or its own --help is
asked for): `memsleuth --help` reads the names and lines below and imports none of them.
"""
from __future__ import annotations

import importlib

# Every command, in the order --help lists them, with its line of help (each module's HELP).
COMMANDS: tuple[tuple[str, str], ...] = (
    ("compare", "compare allocators on a workload or on any command"),
    ("case", "run a case study (the seed field reports), explained from its evidence"),
    ("check", "measure any program, its probe regions, and say what the evidence shows"),
    ("gate", "baseline vs candidate in one session, interleaved; exit 1 on a regression, 5 when unresolved"),
    ("show", "reprint a stored run (the latest by default), or several side by side by machine"),
    ("diff", "compare two stored runs cell by cell (time and counts); exit 1 on a resolved regression"),
    ("history", "list the stored runs"),
    ("export", "export a stored run as json, csv or pyperf"),
    ("merge", "import the runs of other stores into this one (idempotent: by run UUID)"),
    ("fleet", "run a compare or case on several Slurm machine types; status; collect the results"),
    ("doctor", "what this machine can measure and what makes numbers noisy"),
)
# The commands that take a program after `--`.
TAKES_COMMAND = {"compare", "check", "gate", "fleet"}


def module(name: str):
    """The command's module (`add_arguments`, `run`, NAME)."""
    return importlib.import_module(f"memsleuth.commands.{name}")
