"""The flags that make a managed runtime name the code it compiles at run time, set in explaining
runs only, and the files those flags make its processes leave behind, removed once read."""
from __future__ import annotations

import os
import re


# What makes each runtime name the code it compiles at run time in /tmp/perf-PID.map (symbols.py
# reads it), set in explaining runs only and appended to what the program's environment already
# has: V8 (Node.js) maps its compiled functions and, with the second flag, its interpreted ones (its
# stubs and handlers are left out: with them, --perf-basic-prof, a 2 s Node.js program that allocates a
# buffer per request ran 10% slower, 1% with functions only, 6 interleaved rounds; the builtins that
# make the calls are the node binary's own symbols); the JVM
# dumps its map at exit (JDK 17+) and keeps frame pointers in compiled code so a stack can be
# followed through it; CPython 3.12+ gives each Python function a trampoline named in the map.
PERF_MAP_ENV: tuple[tuple[str, str], ...] = (
    ("NODE_OPTIONS", "--perf-basic-prof-only-functions --interpreted-frames-native-stack"),
    ("JAVA_TOOL_OPTIONS", "-XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit -XX:+PreserveFramePointer"),
    ("PYTHONPERFSUPPORT", "1"),
)


def perf_map_env(env: dict[str, str], inherited: dict[str, str]) -> dict[str, str]:
    """PERF_MAP_ENV over a run's environment (`env`, the cell's own; `inherited`, the process's),
    each flag added to what the variable holds already."""
    out = {}
    for name, flags in PERF_MAP_ENV:
        have = env.get(name, inherited.get(name, ""))
        out[name] = flags if name == "PYTHONPERFSUPPORT" else f"{have} {flags}".strip()
    return out


# What those flags leave behind, per process: its perf map, and V8's log, which --perf-basic-prof
# (Node.js 20: not --perf-basic-prof-only-functions; a user's NODE_OPTIONS may hold it) opens in the
# working directory (`isolate-0x<isolate>-<pid>-v8.log`, one per isolate; the flags
# that would move it, --logfile and --no-logfile-per-isolate, are refused in NODE_OPTIONS).
V8_LOG = re.compile(r"^isolate-0x[0-9a-f]+-(\d+)-(?:\d+-)?v8\.log$")


def left_behind(pids, cwd: str) -> list[str]:
    """The files the PERF_MAP_ENV flags make these processes write (those that exist). A pid that
    names a running process is left out: the run's own processes have all ended when this is asked
    (ms-run ends what is left of the tree), so a running one is another's, whose files are its own
    (a pid seen inside a PID namespace can be an unrelated process's pid outside it)."""
    from memsleuth.records.symbols import perf_map_path
    wanted = {int(p) for p in pids if isinstance(p, int) and p > 0 and not os.path.exists(f"/proc/{int(p)}")}
    paths = [perf_map_path(pid) for pid in sorted(wanted)]
    try:
        names = os.listdir(cwd) if wanted else []
    except OSError:
        names = []
    for name in sorted(names):
        m = V8_LOG.match(name)
        if m and int(m.group(1)) in wanted:
            paths.append(os.path.join(cwd, name))
    return paths


def remove_left_behind(pids, since: float, cwd: str) -> list[str]:
    """Removes what these processes wrote under PERF_MAP_ENV at or after `since` (the explaining
    run's start), owned by this user: the run made them, nothing of it is left behind. Returns the
    paths removed."""
    gone = []
    for path in left_behind(pids, cwd):
        try:
            st = os.lstat(path)
            if st.st_mtime >= since - 1 and st.st_uid == os.getuid():
                os.unlink(path)
                gone.append(path)
        except OSError:
            continue
    return gone
