"""The run's sampled stacks in speedscope's own file format (its file-format-schema.json): one
profile per stack set of every cell (stacks.py), which speedscope lists in its profile menu. A pprof
profile holds every sample type, but speedscope shows one of them (its default, else the last), so
the page faults, the calls, the heap's bytes and the CPU time each get their own profile here.
A set with no stack (nothing sampled was live at exit) is left out: speedscope has nothing to show."""
from __future__ import annotations

import json

from memsleuth.analysis import stacks
from memsleuth.errors import UsageError

SCHEMA = "https://www.speedscope.app/file-format-schema.json"
# stacks.StackSet's units as speedscope's ValueUnit ("none" for counts)
UNITS = {"bytes": "bytes", "nanoseconds": "nanoseconds", "count": "none"}


def build(run) -> dict:
    """The speedscope document of a run. UsageError when no stack was sampled."""
    from memsleuth import __version__
    sets = [(c, s) for c in run.cells for s in stacks.for_cell(c) if s.stacks]
    if not sets:
        raise UsageError(f"run {run.id} has no sampled stacks to write for speedscope (`check` samples them, "
                         "`compare --where` too)")
    frames: list[dict] = []
    index: dict[tuple[str, str, int], int] = {}

    def frame(name: str, file: str, line: int) -> int:
        key = (name, file, line)
        if key not in index:
            index[key] = len(frames)
            frames.append({"name": name, **({"file": file} if file else {}), **({"line": line} if line > 0 else {})})
        return index[key]

    multi = len(run.cells) > 1
    profiles = []
    for c, st in sets:
        samples, weights = [], []
        for stack, value in st.stacks:          # outermost first: speedscope's order too
            samples.append([frame(n, f, ln) for n, f, ln, _kind in stack])
            weights.append(value)
        profiles.append({"type": "sampled", "name": f"{c.label}: {st.name}" if multi else st.name,
                         "unit": UNITS.get(st.unit, "none"), "startValue": 0, "endValue": sum(weights),
                         "samples": samples, "weights": weights})
    return {"$schema": SCHEMA, "shared": {"frames": frames}, "profiles": profiles,
            "name": f"memsleuth run {run.id}: {run.name}", "activeProfileIndex": 0,
            "exporter": f"memsleuth {__version__}"}


def render(run) -> str:
    return json.dumps(build(run), separators=(",", ":")) + "\n"
