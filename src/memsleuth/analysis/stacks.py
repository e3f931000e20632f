"""The stack sets a cell's explaining run sampled, in one shape for flame graphs (report/flame.py)
and profiles (report/pprof_export.py): per set, whole stacks outermost first with a value each.

- call sites (sites.py): each event's sampled stacks; a stack's value is its samples times the
  event's period, so it estimates the page faults or calls made along it;
- heap accounting (heap.py): the bytes allocated along each stack, live at the peak, live at exit
  (sampled by bytes: estimates);
- CPU time (cpu_profile.py): each sample's kernel chain under its executable, a sample's value its
  period in nanoseconds; a sample with no kernel frame was in user mode;
- CPU time by user call chain (cpu_stacks.py): the same CPU time's user chains, frame-pointer
  unwound, a collector's and a runtime's frames marked as the runtime's.

A frame is (function, source file, line, kind), kind 'program', 'runtime' or 'kernel'. Pure: it
reads what the store holds.
"""
from __future__ import annotations

from dataclasses import dataclass

from memsleuth.records import cpu_profile
from memsleuth.records.documents import with_defaults
from memsleuth.records.model import Counts
from memsleuth.textsafe import data_text

Frame = tuple[str, str, int, str]

# Each event's set: its name in a report, and pprof's sample type (type, unit).
EVENT_SETS = {"page-faults": ("page faults", "faults")}
HEAP_SETS = (("allocated bytes", "alloc_space"), ("live at the peak", "inuse_space_peak"),
             ("live at exit", "inuse_space_exit"))


@dataclass
class StackSet:
    name: str                     # "page faults", "munmap calls", "allocated bytes", "CPU time"
    type: str                     # pprof's sample type: "faults", "munmap", "alloc_space", "cpu"
    unit: str                     # "count", "bytes", "nanoseconds"
    stacks: list[tuple[tuple[Frame, ...], float]]

    @property
    def total(self) -> float:
        return sum(v for _, v in self.stacks)


def _frames(raw) -> tuple[Frame, ...] | None:
    try:
        return tuple((data_text(f[0]), data_text(f[1]), int(f[2]), str(f[3])) for f in raw)
    except (TypeError, ValueError, IndexError):
        return None


def from_where(where) -> list[StackSet]:
    """The call sites' stacks (records.sites.CallSites), one set per event."""
    out = []
    for event, found in where.events.items() if where else ():
        period = float(found.period or 1)
        stacks = [(fr, float(k) * period) for raw, k in found.stacks
                  if (fr := _frames(raw)) is not None and k]
        if stacks:
            name, type_ = EVENT_SETS.get(event, (f"{event} calls", event))
            out.append(StackSet(name, type_, "count", stacks))
    return out


def from_heap(h) -> list[StackSet]:
    """The heap accounting's stacks (records.heap.Heap), one set per weight: every weight wherever
    any stack was sampled, a weight no sampled block had (nothing sampled was live at exit) as an
    empty set, so that a profile holds every type it advertises."""
    out = []
    for i, (name, type_) in enumerate(HEAP_SETS):
        stacks = []
        for entry in h.stacks if h else ():
            fr = _frames(entry[0]) if entry else None
            if fr is not None and len(entry) > i + 1 and float(entry[i + 1] or 0) > 0:
                stacks.append((fr, float(entry[i + 1])))
        out.append(StackSet(name, type_, "bytes", stacks))
    return out if any(s.stacks for s in out) else []


USER_MODE = "[user mode]"


def from_cpu(doc: dict | None) -> list[StackSet]:
    """The CPU samples' kernel chains under their executable (ms-run's cpu_profile document)."""
    if not isinstance(doc, dict):
        return []
    doc = with_defaults(doc, cpu_profile.PROFILE_DEFAULTS)
    try:
        names = [str(f) for f in doc["frames"]]
        exes = [str(e[0]) for e in doc["executables"]]
        period = float(doc["period_ns"])
        stacks = Counts()
        for exe, n, _elided, idx, *_ in doc["stacks"]:
            top: Frame = (exes[int(exe)] if 0 <= int(exe) < len(exes) else "?", "", 0, "program")
            chain = tuple((names[int(i)], "", 0, "kernel") for i in reversed(idx))
            key = (top, *chain) if chain else (top, (USER_MODE, "", 0, "program"))
            stacks[key] += int(n) * period
    except (TypeError, ValueError, IndexError):
        return []
    return [StackSet("CPU time", "cpu", "nanoseconds", list(stacks.items()))] if stacks and period else []


KERNEL_MODE = "[in the kernel]"


def from_cpu_stacks(c) -> list[StackSet]:
    """The CPU samples' user call chains under their executable (records.cpu_stacks.CpuStacks): a
    frame is a runtime's where a runtime's frames or collector name it, else the program's; a sample
    taken in the kernel ends in one kernel frame (its kernel path is the "CPU time" set's)."""
    from memsleuth.analysis import runtimes
    if c is None or not c.stacks or not c.period_ns:
        return []

    def kind(fn: str) -> str:
        return "runtime" if any(rt.frames.search(fn) or (rt.gc is not None and rt.gc.search(fn))
                                for rt in runtimes.TABLE) else "program"
    stacks = Counts()
    for st in c.stacks:
        key = ((data_text(st.executable), "", 0, "program"),
               *((data_text(fn), "", 0, kind(fn)) for fn in reversed(st.functions)))
        if st.in_kernel:
            key += ((KERNEL_MODE, "", 0, "kernel"),)
        stacks[key] += st.samples * float(c.period_ns)
    return [StackSet("CPU time by user call chain", "cpu_user", "nanoseconds", list(stacks.items()))]


def for_cell(cell) -> list[StackSet]:
    """Every stack set of a stored cell's explaining run (records.StoredCell)."""
    explain = next(iter(cell.explain_samples), None)
    sets = from_where(cell.where)
    if explain is not None:
        sets += from_heap(explain.heap) + from_cpu(explain.cpu_profile) + from_cpu_stacks(explain.cpu_stacks)
    return sets


@dataclass
class Node:
    """A flame graph's box: a function on the path from the root, the value of every stack through
    it, and its callees."""
    name: str
    kind: str
    value: float = 0.0
    children: dict | None = None     # (name, kind) -> Node

    def child(self, name: str, kind: str) -> "Node":
        if self.children is None:
            self.children = {}
        return self.children.setdefault((name, kind), Node(name, kind))

    @property
    def depth(self) -> int:
        return 1 + max((c.depth for c in (self.children or {}).values()), default=0)


def merge(s: StackSet) -> Node:
    """The set's stacks merged by function from the outermost frame in (a flame graph's tree)."""
    root = Node("all", "root")
    for frames, value in s.stacks:
        node = root
        node.value += value
        for name, _file, _line, kind in frames:
            node = node.child(name, kind)
            node.value += value
    return root
