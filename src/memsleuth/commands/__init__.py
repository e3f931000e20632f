"""The subcommands: one module each, declaring its parser (`add_arguments`) and its `run`.

`cli.py` only builds the parser from these and dispatches. Options shared by several commands
are declared once in `options.py`; orchestration (begin a run, run it, finish, emit) is
`memsleuth.session`.
"""
from __future__ import annotations

from memsleuth.commands import case, check, compare, diff, doctor, export, fleet, gate, history, merge, show

COMMANDS = (compare, case, check, gate, show, diff, history, export, merge, fleet, doctor)
# The commands that take a program after `--`.
TAKES_COMMAND = {compare.NAME, check.NAME, gate.NAME, fleet.NAME}
