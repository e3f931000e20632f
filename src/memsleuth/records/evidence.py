"""The typed evidence of one sample (one run of one process) and of one probe region.

Built from ms-run's JSON document (docs/json-schema.md describes the fields). The document is
what the store keeps; these classes are how everything downstream reads it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace

from memsleuth.records.cpu_stacks import CpuStacks
from memsleuth.records.documents import with_defaults
from memsleuth.records.heap import Heap
from memsleuth.records.model import Counts, Readings
from memsleuth.records.syscall_args import SyscallArgs


# A probe region's line: each field the region reads, with its value where the line lacks it.
REGION_DEFAULTS = {"name": "", "depth": 0, "ops": 0, "wall_ns": 0, "user_ns": 0, "sys_ns": 0, "counters": {},
                   "syscalls": {}, "brk_delta_bytes": None, "rss_start_kb": None, "rss_end_kb": None,
                   "rusage_minflt": None, "rusage_majflt": None}
# ms-run's document (docs/json-schema.md): each field a sample reads, with its value where the
# document lacks it (an older schema, or a run that failed before writing it).
SAMPLE_DEFAULTS = {"status": "error", "detail": None, "exit_code": None, "signal": None, "signal_name": None,
                   "wall_ns": 0, "user_ns": 0, "sys_ns": 0, "minflt": 0, "majflt": 0, "nvcsw": 0, "nivcsw": 0,
                   "maxrss_kb": 0, "counters": {}, "syscalls": {}, "unsupported": {}, "malloc_object": None,
                   "stdout_tail": "", "stderr_tail": "", "leftover_processes": [], "user_only": [], "probe": [],
                   "syscall_args": None, "heap": None, "where": None, "cpu_profile": None, "cpu_stacks": None,
                   "result": None,
                   "timeline": None, "rss_kb": None, "machine_tasks_created": None,
                   "events_by": None, "syscalls_counted": True}


class CounterReadings:
    """Named access to a `counters` dict of perf readings (a region's, or medians of several)."""
    counters: Readings

    @property
    def minflt(self) -> float | None:
        return self.counters["page-faults-minor"]

    @property
    def majflt(self) -> float | None:
        return self.counters["page-faults-major"]

    @property
    def context_switches(self) -> float | None:
        return self.counters["context-switches"]


@dataclass(frozen=True)
class Region(CounterReadings):
    name: str
    depth: int
    ops: int
    wall_ns: int
    user_ns: int
    sys_ns: int
    counters: Readings
    syscalls: Counts
    brk_delta_bytes: int | None = None   # how far the program break moved during the region
    rss_start_kb: int | None = None
    rss_end_kb: int | None = None

    @classmethod
    def from_line(cls, d: dict) -> "Region":
        d = with_defaults(d, REGION_DEFAULTS)
        counters = Readings(d["counters"])
        # Where perf cannot count faults (perf_event_paranoid, no root), the probe's getrusage
        # still does: the same faults of the whole process, read at the region's borders.
        for event, key in (("page-faults-minor", "rusage_minflt"), ("page-faults-major", "rusage_majflt")):
            if counters[event] is None and d[key] is not None:
                counters[event] = float(d[key])
        return cls(name=str(d["name"]), depth=int(d["depth"]), ops=int(d["ops"]), wall_ns=int(d["wall_ns"]),
                   user_ns=int(d["user_ns"]), sys_ns=int(d["sys_ns"]), counters=counters,
                   syscalls=Counts({k: int(v) for k, v in d["syscalls"].items()}),
                   brk_delta_bytes=d["brk_delta_bytes"], rss_start_kb=d["rss_start_kb"], rss_end_kb=d["rss_end_kb"])

    @property
    def rss_growth_kb(self) -> int | None:
        if self.rss_start_kb is None or self.rss_end_kb is None:
            return None
        return self.rss_end_kb - self.rss_start_kb

    @property
    def ops_per_s(self) -> float | None:
        return self.ops / (self.wall_ns / 1e9) if self.ops and self.wall_ns else None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Timeline:
    """ms-run's timeline of the process tree: one row per tick, running totals in the counter
    columns (docs/json-schema.md)."""
    columns: tuple[str, ...]
    rows: tuple[tuple[int, ...], ...]
    interval_ms: int = 10

    @classmethod
    def from_doc(cls, doc: dict) -> "Timeline | None":
        d = with_defaults(doc, SAMPLE_DEFAULTS)
        t = with_defaults(d["timeline"], {"columns": [], "rows": [], "interval_ms": 10}) \
            if isinstance(d["timeline"], dict) else None
        if t and t["columns"]:
            cols = tuple(str(c) for c in t["columns"])
            rows = tuple(tuple(int(x) for x in r) for r in t["rows"] if len(r) == len(cols))
            return cls(cols, rows, int(t["interval_ms"]))
        if d["rss_kb"]:  # schema 1: (ms, RSS) pairs only
            return cls(("t_ms", "rss_kb"), tuple((int(p[0]), int(p[1])) for p in doc["rss_kb"] if len(p) >= 2))
        return None

    def column(self, name: str) -> list[int] | None:
        if name not in self.columns:
            return None
        i = self.columns.index(name)
        return [r[i] for r in self.rows]

    @property
    def times_ms(self) -> list[int]:
        return self.column("t_ms") or []

    def growing(self, columns) -> list[str]:
        """The running-total columns among `columns` that grew during the run."""
        out = []
        for c in columns:
            v = self.column(c)
            if v and v[-1] > v[0]:
                out.append(c)
        return out

    def rate(self, column: str, a: int, b: int) -> float:
        """Per second between rows a and b, from the running total `column`."""
        v, t = self.column(column), self.times_ms
        return (v[b] - v[a]) / ((t[b] - t[a]) / 1000 or 1e-3)

    def rates(self, column: str) -> tuple[list[float], list[float]]:
        """Per second within each tick, at the tick's middle: (seconds, per second)."""
        v, t = self.column(column) or [], [x / 1000 for x in self.times_ms]
        return ([(a + b) / 2 for a, b in zip(t, t[1:])],
                [(y - x) / max(b - a, 1e-3) for x, y, a, b in zip(v, v[1:], t, t[1:])])

    def slices(self, n: int) -> list[tuple[int, int]]:
        """The run cut into at most n slices of about as many ticks: (first row, last row) each."""
        k = min(n, len(self.rows) - 1)
        if k < 1:
            return []
        cuts = [round(i * (len(self.rows) - 1) / k) for i in range(k + 1)]
        return list(zip(cuts, cuts[1:]))

    def to_dict(self) -> dict:
        return {"columns": list(self.columns), "rows": [list(r) for r in self.rows], "interval_ms": self.interval_ms}


def median_by_wall(samples: list) -> int | None:
    """The index of the run with the median wall time (the lower median of an even count): the run
    a timeline is read from."""
    if not samples:
        return None
    order = sorted(range(len(samples)), key=lambda i: samples[i].wall_ns)
    return order[(len(order) - 1) // 2]


@dataclass(frozen=True)
class Sample:
    status: str
    detail: str | None
    exit_code: int | None
    signal: int | None
    signal_name: str | None
    wall_ns: int
    user_ns: int
    sys_ns: int
    minflt: int
    majflt: int
    nvcsw: int
    nivcsw: int
    maxrss_kb: int
    counters: Readings
    syscalls: Counts
    unsupported: dict[str, str]
    regions: tuple[Region, ...]
    malloc_object: str | None
    rss_kb: tuple[tuple[int, int], ...]          # (ms since start, resident KiB of the process tree)
    stdout_tail: str
    stderr_tail: str
    leftover_processes: tuple[dict, ...] = ()     # still running when the command ended: killed with it
    user_only: tuple[str, ...] = ()               # events the kernel let count in user space only
    timeline: Timeline | None = None
    syscall_args: SyscallArgs = field(default_factory=SyscallArgs)   # munmap/madvise/mmap/mremap/brk arguments
    result: dict | None = None       # the workload's own result line, if any
    heap: Heap | None = None         # heap accounting of an explaining run (heap.py), if any
    where: dict | None = None        # call sites sampled in an explaining run (sites.py), if any
    cpu_profile: dict | None = None  # CPU time sampled with kernel chains in an explaining run (cpu_profile.py)
    cpu_stacks: CpuStacks | None = None   # the same CPU time's user chains, named (cpu_stacks.py)
    # processes and threads the whole machine created during the run (/proc/stat): at least the
    # tree's own, other users' included; None where /proc/stat was not read
    machine_tasks_created: int | None = None
    # how ms-run's perf events followed the tree: "cgroup" (per-CPU events of the command's own
    # cgroup) or "inherited" (a copy in each task, which makes creating one cost more); None: older
    events_by: str | None = None
    # False: a timed run that counted no syscall by name (ms-run --no-syscalls: counting costs each
    # call); its cell's counting run(s) give them (with_counts), and syscalls_from then says so
    syscalls_counted: bool = True
    syscalls_from: str | None = None
    counted_in: tuple = ()      # with syscalls_from: each counting run's own counts (Counts), once each
    raw: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_msrun(cls, doc: dict, result: dict | None = None) -> "Sample":
        d = with_defaults(doc, SAMPLE_DEFAULTS)
        if result is None and isinstance(d["result"], dict):
            result = d["result"]
        regions = tuple(r for p in d["probe"]
                        if isinstance(p, dict) and p.get("type") == "region" and (r := _region_or_none(p)) is not None)
        if isinstance(result, dict) and "metric" in result and not _finite(result["metric"]):
            result = {k: v for k, v in result.items() if k != "metric"}   # a figure that is not a number
        rss = _rss_pairs(doc)
        # One definition of a run's peak resident memory: the larger of ru_maxrss (the largest
        # single process) and the timeline's highest sum over the process tree, so that the
        # time-averaged RSS (the same timeline) can never exceed it.
        peak_kb = max([int(d["maxrss_kb"]), *(r for _, r in rss)])
        # ms-run counts faults from the kernel's per-task counts (a command's rusage, an attached
        # window's /proc differences), not with a perf event, which would cost each fault: where the
        # document has no fault event, its counters read those figures (an older document's are perf's).
        counters = Readings(d["counters"])
        for event, key in (("page-faults-minor", "minflt"), ("page-faults-major", "majflt")):
            if event not in counters and key in doc and _finite(doc[key]):
                counters[event] = float(doc[key])
        return cls(
            status=d["status"], detail=d["detail"], exit_code=d["exit_code"], signal=d["signal"],
            signal_name=d["signal_name"], wall_ns=int(d["wall_ns"]), user_ns=int(d["user_ns"]), sys_ns=int(d["sys_ns"]),
            minflt=int(d["minflt"]), majflt=int(d["majflt"]), nvcsw=int(d["nvcsw"]), nivcsw=int(d["nivcsw"]),
            maxrss_kb=peak_kb, counters=counters,
            syscalls=Counts({k: int(v) for k, v in d["syscalls"].items()}),
            unsupported=dict(d["unsupported"]), regions=regions, malloc_object=d["malloc_object"], rss_kb=rss,
            stdout_tail=d["stdout_tail"], stderr_tail=d["stderr_tail"],
            leftover_processes=tuple(p for p in d["leftover_processes"] if isinstance(p, dict)),
            user_only=tuple(str(x) for x in d["user_only"]),
            timeline=Timeline.from_doc(doc),
            syscall_args=SyscallArgs.from_dict(d["syscall_args"]),
            result=result, heap=Heap.from_dict(d["heap"]),
            where=d["where"] if isinstance(d["where"], dict) else None,
            cpu_profile=d["cpu_profile"] if isinstance(d["cpu_profile"], dict) else None,
            cpu_stacks=CpuStacks.from_dict(d["cpu_stacks"]),
            machine_tasks_created=_int_or_none(d["machine_tasks_created"]),
            events_by=d["events_by"] if d["events_by"] in ("cgroup", "inherited") else None,
            syscalls_counted=d["syscalls_counted"] is not False, raw=doc,
        )

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def region(self, name: str) -> Region | None:
        """The first top-level region of that name (the probe emits inner regions first)."""
        found = [r for r in self.regions if r.name == name]
        return min(found, key=lambda r: r.depth) if found else None

    @property
    def main(self) -> Region | None:
        return self.region("main")

    @property
    def ops_per_s(self) -> float | None:
        """Throughput of the region of interest: region `main` when the program has one."""
        m = self.main
        return m.ops_per_s if m else None

    def metric(self, kind: str) -> float:
        """The headline value: region main's ops/s ("ops_per_s"), the figure the program printed
        ("output", `compare --metric`), the process's wall seconds ("wall_s") or the process tree's
        CPU seconds, user and system ("cpu_s")."""
        if kind == "ops_per_s":
            return self.ops_per_s
        if kind == "output":
            return float(self.result["metric"])
        if kind == "cpu_s":
            return (self.user_ns + self.sys_ns) / 1e9
        return self.wall_ns / 1e9

    @property
    def mean_rss_kb(self) -> float | None:
        """Time-averaged resident memory of the process tree (trapezoids over the timeline), or
        None when the timeline has fewer than two points apart in time: a run shorter than ms-run's
        tick has one point, read as the program was exec'd (a few hundred KiB), which is no average
        of the run. Never above the run's peak (the peak is at least every point's value, and the
        points are taken in time order)."""
        pts = sorted((t, r) for t, r in self.rss_kb if r > 0)
        if len(pts) < 2 or pts[-1][0] <= pts[0][0]:
            return None
        area = sum((t1 - t0) * (r0 + r1) / 2 for (t0, r0), (t1, r1) in zip(pts, pts[1:]))
        return min(area / (pts[-1][0] - pts[0][0]), float(self.maxrss_kb))

    def to_dict(self) -> dict:
        """Every field but the raw document, in JSON-ready types."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "raw"}
        out["regions"] = [r.to_dict() for r in self.regions]
        out["rss_kb"] = [list(p) for p in self.rss_kb]
        out["leftover_processes"] = list(self.leftover_processes)
        out["timeline"] = self.timeline.to_dict() if self.timeline else None
        out["user_only"] = list(self.user_only)
        out["heap"] = self.heap.to_dict() if self.heap else None
        out["cpu_stacks"] = self.cpu_stacks.to_dict() if self.cpu_stacks else None
        out["syscall_args"] = self.syscall_args.to_dict()
        out["counted_in"] = [dict(c) for c in self.counted_in]
        return out


def _finite(v) -> bool:
    import math
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _int_or_none(v) -> int | None:
    return int(v) if _finite(v) and v >= 0 else None


def _region_or_none(line: dict) -> "Region | None":
    """A region line from the probe channel, or None when it is malformed: a program may write
    anything to MEMSLEUTH_FD ("wall_ns": "abc", null, 1e400, a list for syscalls), and one bad
    line must not end the comparison. Numbers must be finite; counters and syscalls objects."""
    try:
        for key in ("depth", "ops", "wall_ns", "user_ns", "sys_ns"):
            if key in line and not _finite(line[key]):
                return None
        for key in ("counters", "syscalls"):
            if line.get(key) is not None and not isinstance(line[key], dict):
                return None
        d = with_defaults(line, REGION_DEFAULTS)
        if any(not _finite(v) for v in d["syscalls"].values()):
            return None
        if any(v is not None and not _finite(v) for v in d["counters"].values()):
            return None
        for key in ("brk_delta_bytes", "rss_start_kb", "rss_end_kb", "rusage_minflt", "rusage_majflt"):
            if d[key] is not None and not _finite(d[key]):
                return None
        return Region.from_line(line)
    except (TypeError, ValueError, OverflowError):
        return None


def metric_kind(samples: list[Sample]) -> str:
    """The program's own figure when every sample has one (`--metric`); else the throughput of
    region main when every sample has one (higher is better); else wall time."""
    if samples and all(s.result and "metric" in s.result for s in samples):
        return "output"
    return "ops_per_s" if samples and all(s.ops_per_s for s in samples) else "wall_s"


def higher_is_better(kind: str, samples: list[Sample]) -> bool:
    if kind == "output":
        return bool(samples and samples[0].result.get("higher_is_better", True))
    return kind == "ops_per_s"


def _rss_pairs(doc: dict) -> tuple[tuple[int, int], ...]:
    t = Timeline.from_doc(doc)
    if t is None:
        return ()
    return tuple(zip(t.times_ms, t.column("rss_kb") or []))


# Where a timed run's syscall counts come from when it counted none (Sample.syscalls_from).
COUNTING_RUN = "counting run"
NOT_COUNTED = "not counted in a timed run"   # ms-run's reason for each syscall left closed


def with_counts(sample: Sample, counting: list[Sample]) -> Sample:
    """A timed run that counted no syscall by name (ms-run --no-syscalls), with its cell's counts
    from the untimed run(s) that counted them (its warm-ups): the median of each name over them,
    for the process and for each region (by name and occurrence); `syscalls_from` says so. Any
    other sample, or one without a counting run, as it is. A program that makes the same calls run
    after run (most do) has the same counts in both; one paced by time or by its threads' contention
    (futex) has the counting run's."""
    if sample.syscalls_counted or not counting:
        return sample

    def med(dicts: list[Counts]) -> Counts:
        names = [k for k in dicts[0] if all(k in d for d in dicts)]
        return Counts({k: sorted(d[k] for d in dicts)[(len(dicts) - 1) // 2] for k in names})

    def occurrences(regions) -> dict[tuple[str, int], Region]:
        seen: dict[str, int] = {}
        out = {}
        for r in regions:
            k = seen[r.name] = seen.get(r.name, -1) + 1
            out[(r.name, k)] = r
        return out

    theirs = [occurrences(c.regions) for c in counting]
    regions = []
    for key, r in occurrences(sample.regions).items():
        found = [t[key].syscalls for t in theirs if key in t]
        regions.append(replace(r, syscalls=med(found)) if len(found) == len(theirs) else r)
    syscalls = med([c.syscalls for c in counting])
    # a name the counting run could not count either keeps that run's reason
    unsupported = {k: v for k, v in sample.unsupported.items() if NOT_COUNTED not in v}
    for c in counting:
        for k, v in c.unsupported.items():
            if k not in syscalls:
                unsupported.setdefault(k, v)
    if not syscalls:        # the counting run could not count either (no root, no tracefs): its reasons only
        return replace(sample, unsupported=unsupported)
    return replace(sample, syscalls=syscalls, regions=tuple(regions), unsupported=unsupported,
                   syscalls_from=COUNTING_RUN, counted_in=tuple(c.syscalls for c in counting))
