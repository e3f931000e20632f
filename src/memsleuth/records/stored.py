"""The records a stored run is read back as: runs -> cells -> samples, with the rounds that are
not measured (warm-up, the explaining run) and the reference cell's position. The store writes
and reads them; analysis, cases and reports read them and never import the store.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from memsleuth.records.documents import number, of_type, with_defaults
from memsleuth.records.evidence import Sample, with_counts
from memsleuth.records.model import AllocatorInfo, MachineInfo, RunSpec, cell_label, contender
from memsleuth.records.sites import CallSites

WARMUP_ROUND = -1
# One more run per cell, after the measured ones, that explains them (syscall arguments, heap
# accounting, call sites): what it records costs the program, so no measured run carries it.
EXPLAIN_ROUND = -2
# The position of the reference cell (plan.reference_cell): loaded as StoredRun.reference, never
# among the compared cells.
REFERENCE_POSITION = -1


@dataclass
class StoredCell:
    id: int
    position: int
    allocator: AllocatorInfo
    params: dict
    env: dict
    command: list
    samples: list[tuple[int, bool, Sample]]  # (round, warmup, sample)
    where: CallSites | None = None            # call sites (sites.py), when recorded

    def __post_init__(self):
        # Timed runs that counted no syscall by name read their cell's counting runs' (with_counts).
        counting = self.counting_samples
        if counting:
            self.samples = [(r, w, s if w else with_counts(s, counting)) for r, w, s in self.samples]

    @property
    def counting_samples(self) -> list[Sample]:
        """The untimed runs that counted the syscalls by name for the timed ones: the ok warm-ups
        (the explaining run counts too, but its own libraries make calls the program does not)."""
        return [s for r, w, s in self.samples if w and r == WARMUP_ROUND and s.ok and s.syscalls_counted]

    @property
    def label(self) -> str:
        return cell_label(self.allocator.name, self.params)

    @property
    def contender(self) -> str:
        return contender(self.allocator.name, self.params)

    def measured(self) -> list[tuple[int, Sample]]:
        return [(r, s) for r, w, s in self.samples if not w]

    @property
    def explain_samples(self) -> list[Sample]:
        """The explaining run(s): not measured, they carry the syscalls' arguments."""
        return [s for r, w, s in self.samples if r == EXPLAIN_ROUND and s.ok]

    @property
    def explain_failures(self) -> list[Sample]:
        """The explaining runs that failed: never the cell's failure (its measured runs say that), and
        what they would have gathered is missing."""
        return [s for r, w, s in self.samples if r == EXPLAIN_ROUND and not s.ok]

    def failures(self) -> list[Sample]:
        """The cell's failed runs: the measured ones, or where none was measured (a failed warm-up or
        preload check ends the cell) the warm-ups'. A failed explaining run is not among them."""
        measured = self.measured()
        if measured:
            return [s for _, s in measured if not s.ok]
        return [s for r, w, s in self.samples if w and r != EXPLAIN_ROUND and not s.ok]


@dataclass(frozen=True)
class GlibcArenas:
    """glibc's arenas of an attached process, found by their heaps' headers: resident bytes."""
    main_arena_rss: float | None
    arenas: int
    arena_rss: float | None


# check --pid's window as attach stores it (RunSpec.facts["attached"], docs/json-schema.md).
ATTACHED_DEFAULTS = {"pids": [], "duration_s": None, "window_s": 0.0, "threads_at_start": None,
                     "threads_at_end": None, "ended_by": None, "exited_at_ns": None, "smaps": {}, "arenas": {},
                     "cannot": None, "why": None}


@dataclass(frozen=True)
class AttachedWindow:
    """A check --pid window: what it was, how it ended, and the memory read at its end."""
    pids: tuple[int, ...]
    duration_s: float | None               # None: until Ctrl-C
    window_s: float
    threads_at_start: int | None
    threads_at_end: int | None
    ended_by: str | None                   # duration, signal, exit, failed (nothing measured); None: not recorded
    exited_at_ns: float | None
    smaps: dict[str, dict[str, float]] = field(default_factory=dict)     # pid -> kind -> resident bytes
    arenas: dict[str, GlibcArenas] = field(default_factory=dict)         # pid -> glibc's arenas
    cannot: str | None = None              # what attaching does not measure
    why: str | None = None                 # ended_by failed: why nothing was measured

    def arenas_of(self, pid: str) -> GlibcArenas | None:
        """glibc's arenas of one of the processes, where they were found."""
        return self.arenas[pid] if pid in self.arenas else None

    @classmethod
    def from_facts(cls, facts: dict | None) -> "AttachedWindow | None":
        at = of_type(facts or {}, "attached", dict)
        if not at:
            return None
        d = with_defaults(at, ATTACHED_DEFAULTS)
        smaps = {str(pid): {str(k): float(v) for k, v in kinds.items() if number(v) is not None}
                 for pid, kinds in d["smaps"].items() if isinstance(kinds, dict)}
        arenas = {}
        for pid, a in d["arenas"].items():
            if isinstance(a, dict):
                a = with_defaults(a, {"main_arena_rss": None, "arenas": 0, "arena_rss": None})
                arenas[str(pid)] = GlibcArenas(number(a["main_arena_rss"]), int(a["arenas"]), number(a["arena_rss"]))
        return cls(tuple(int(p) for p in d["pids"]), number(d["duration_s"]), float(d["window_s"]),
                   d["threads_at_start"], d["threads_at_end"], d["ended_by"], number(d["exited_at_ns"]), smaps,
                   arenas, d["cannot"], d["why"])


# The facts a run records beside its cells (RunSpec.facts), as their readers take them: check's
# phase timings; a --try session's candidates and the check it follows; a fleet task Slurm did not
# complete (commands/fleet.py); each with its value where the run has none.
FACTS_DEFAULTS = {"timings": {}, "tries": [], "check_run": None, "slurm_job": "?", "slurm_state": "?",
                  "exit_code": None, "partition": None, "node": None, "log_tail": ""}


@dataclass(frozen=True)
class RunFacts:
    timings: dict
    tries: list
    check_run: int | None
    slurm_job: str
    slurm_state: str
    exit_code: int | None
    partition: str | None
    node: str | None
    log_tail: str

    @classmethod
    def from_facts(cls, facts: dict | None) -> "RunFacts":
        d = with_defaults(facts if isinstance(facts, dict) else {}, FACTS_DEFAULTS)
        return cls(d["timings"] if isinstance(d["timings"], dict) else {},
                   d["tries"] if isinstance(d["tries"], list) else [], d["check_run"], str(d["slurm_job"]),
                   str(d["slurm_state"]), d["exit_code"], d["partition"], d["node"], str(d["log_tail"]))


@dataclass
class StoredRun:
    id: int
    created_at: str
    finished_at: str | None
    status: str
    kind: str
    name: str
    argv: list
    spec: RunSpec
    machine: MachineInfo
    version: str
    cells: list[StoredCell]
    reference: StoredCell | None = None       # the reference cell (plan.reference_cell), not compared
    uuid: str = ""                             # identity across stores (merge)

    @property
    def attached(self) -> AttachedWindow | None:
        """The window, when the run is a check --pid one."""
        return AttachedWindow.from_facts(self.spec.facts)

    @property
    def facts(self) -> RunFacts:
        """What the run recorded beside its cells (RunFacts)."""
        return RunFacts.from_facts(self.spec.facts)


@dataclass
class RunSummary:
    """One line of `memsleuth history`."""
    id: int
    created_at: str
    status: str
    kind: str
    name: str
    argv: list
    machine: MachineInfo
    cells: int
    samples: int
