"""The one reader of /proc/PID/stat: the store (is a run's writer still alive?) and attach (is a
pid still the process attached to?) both name a process by its pid and its start time. And of a
process's children and executable mappings, for check's symbolizer warm-up (session)."""
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


def task_dir(pid: int) -> str:
    """Where a process's memory files are read: /proc/PID, or where its main thread has exited
    (pthread_exit, while other threads run: the main thread's own maps and smaps are then empty)
    /proc/PID/task/TID of a thread that runs."""
    if (stat_fields(pid) or ["?"])[0] not in ("Z", "X"):
        return f"/proc/{int(pid)}"
    import os
    try:
        tids = sorted(int(t) for t in os.listdir(f"/proc/{int(pid)}/task") if t.isdigit())
    except OSError:
        return f"/proc/{int(pid)}"
    live = next((t for t in tids if t != int(pid) and (stat_fields(t) or ["Z"])[0] not in ("Z", "X")), None)
    return f"/proc/{int(pid)}/task/{live}" if live is not None else f"/proc/{int(pid)}"


def children(pid: int) -> list[int]:
    """The processes `pid`'s threads started (each thread's /proc/PID/task/TID/children); [] where
    the kernel does not list children."""
    import os
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{int(pid)}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{int(pid)}/task/{tid}/children", encoding="ascii") as f:
                out += [c for c in map(int, f.read().split()) if c not in out]
        except (OSError, ValueError):
            continue
    return out


def descendants(pid: int, most: int = 64) -> list[int]:
    """The processes `pid` started and theirs (children), at most `most`."""
    out: list[int] = []
    todo = [int(pid)]
    while todo and len(out) < most:
        found = [c for c in children(todo.pop()) if c not in out]
        out += found
        todo += found
    return out[:most]


def executable_files(pid: int) -> list[str]:
    """The files a process maps executable (/proc/PID/maps), each once, in the order of their
    mappings; [] where it cannot be read."""
    out: list[str] = []
    try:
        with open(f"/proc/{int(pid)}/maps", encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                fields = line.split(None, 5)
                if len(fields) == 6 and "x" in fields[1] and fields[5].startswith("/"):
                    path = fields[5].rstrip("\n")
                    if not path.endswith(" (deleted)") and path not in out:
                        out.append(path)
    except OSError:
        pass
    return out
