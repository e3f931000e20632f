"""The one reader of /proc/PID/stat: the store (is a run's writer still alive?) and attach (is a
pid still the process attached to?) both name a process by its pid and its start time."""
from __future__ import annotations


def stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (state first, so field N of proc(5) is
    [N - 3]), or None when there is no such process. The command name may hold anything, spaces and
    parentheses included: it ends at the last ')'."""
    try:
        with open(f"/proc/{int(pid)}/stat", encoding="utf-8", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError, ValueError):
        return None


def start_time(pid: int) -> int | None:
    """When the process started (clock ticks since boot): with its pid, what names this process and
    no later one that reuses the pid. None when there is no such process."""
    fields = stat_fields(pid)
    try:
        return int(fields[19])
    except (TypeError, IndexError, ValueError):
        return None
