"""thread-heap (seed 002): threads vs processes, a function-local std::vector, and glibc's arenas.

On the K computer a hybrid MPI+OpenMP code was slower than flat MPI, and one `thread_local` on a
std::vector fixed part of it. The case runs T workers that each build a vector many times, as
threads of one process and as T processes, in three forms (function-local, thread_local reused,
static indexed by worker), under glibc tunables (arena_max, mmap_threshold, trim_threshold) and
other allocators. It shows the speed ratios with their CIs, the futex and context-switch counts,
and each process's glibc arenas with their resident bytes, from the heap accounting of each cell's
explaining run (heap.py), as `check` shows them for any program.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from memsleuth import stats
from memsleuth.analysis.findings.lock_contention import FUTEX_PER_KOP
from memsleuth.analysis.summary import cell_view
from memsleuth.cases.base import (CASE_NOISE, Case, CaseResult, CaseTable, Num, Ratio, Seq, Tunable, Variant, params_of,
    percent_of, status_text, tunable_variant)
from memsleuth.stats import median_of as med
from memsleuth.records.heap import Heap
from memsleuth.records.model import Readings
from memsleuth.records.stored import StoredCell, StoredRun
from memsleuth.measure.workloads import thread_heap
from memsleuth.measure.workloads.base import Param

TUNABLES: dict[str, Tunable] = {
    "default": None,
    "arena_max": ("arena_max=1", "glibc.malloc.arena_max=1"),
    "mmap_threshold": ("mmap_threshold=8K", "glibc.malloc.mmap_threshold=8192"),
    "trim_threshold": ("trim_threshold=0", "glibc.malloc.trim_threshold=0"),
}
# Ratios are called only when their whole 95% CI lies beyond +-2% (this VM's run-to-run spread
# for runs of this length; docs/statistics.md).
# Threads are said to wait on each other in the kernel at lock_contention's threshold: the one
# threshold of that mechanism (futex calls per 1,000 operations of region main).


@dataclass
class VariantEvidence:
    cell: StoredCell
    allocator: str
    tunables: str
    form: str
    mode: str
    per_call_ns: dict[int, float]         # by round: region main's wall / calls per worker
    futex_per_kcall: float | None
    cs_per_kcall: float | None
    maps_per_kcall: float | None          # mmap + munmap
    sys_share: float | None
    heaps: list[list[int]] | None         # per process (by pid), resident bytes per arena, the main one
                                          # first; None: not read (no accounting, or not glibc's malloc)
    malloc_object: str | None             # what served malloc in the accounted run
    status: str

    @property
    def per_call(self) -> float | None:
        return med(self.per_call_ns.values())

    @property
    def where(self) -> str:
        t = "" if self.tunables == "default" else f" {self.tunables}"
        return f"{self.allocator}{t}"


def _per_k(samples, get, calls: int) -> float | None:
    v = med(get(s) for s in samples)
    return 1000 * v / calls if v is not None and calls else None


# What the analysis reads of a cell's parameters.
CELL_PARAMS = {"threads": 1, "calls": 1, "tunables": "default", "form": None, "mode": None}


def _evidence(cell: StoredCell) -> VariantEvidence:
    samples = cell_view(cell).samples
    params = params_of(cell.params, CELL_PARAMS)
    workers, calls = int(params["threads"]), int(params["calls"])
    total = workers * calls
    per_call = {r: s.main.wall_ns / calls for r, s in cell.measured() if s.ok and s.main}
    main = [s.main for s in samples if s.main]
    accounted = next((s.heap for s in cell.explain_samples if s.heap), None)
    heaps = arenas_by_process(accounted)
    cpu = [(s.user_ns, s.sys_ns) for s in samples]
    sys_share = med(sy / (u + sy) for u, sy in cpu if u + sy > 0)
    return VariantEvidence(
        cell=cell, allocator=cell.allocator.name, tunables=str(params["tunables"]),
        form=str(params["form"]), mode=str(params["mode"]), per_call_ns=per_call,
        futex_per_kcall=_per_k(main, lambda r: r.syscalls["futex"] if "futex" in r.syscalls else None, total)
        if main else None,
        cs_per_kcall=_per_k(main, lambda r: r.context_switches, total) if main else None,
        maps_per_kcall=_per_k(main, lambda r: (r.syscalls["mmap"] + r.syscalls["munmap"])
                              if "mmap" in r.syscalls else None, total) if main else None,
        sys_share=sys_share, heaps=heaps,
        malloc_object=accounted.malloc_object if accounted else None, status=status_text(cell))


def arenas_by_process(accounted: Heap | None) -> list[list[int]] | None:
    """Per accounted process, its glibc arenas' resident bytes at exit (the main arena first); None
    when no process was accounted or malloc was not glibc's (the accounting reads no arenas)."""
    out = []
    for p in accounted.processes_detail if accounted else ():
        at = p.at_exit
        if at.arenas is None:
            return None
        out.append(([int(at.main_arena_kb) * 1024] if at.main_arena_kb is not None else [])
                   + [int(kb) * 1024 for kb in at.arena_kb])
    return out or None


def ratio(a: VariantEvidence, b: VariantEvidence) -> stats.Estimate | None:
    """a's time per call over b's, paired by round."""
    return stats.paired_by_round(a.per_call_ns, b.per_call_ns)


def _heaps_words(e: VariantEvidence) -> str:
    per = "; ".join(", ".join(f"{b / 1024:,.0f} KiB" for b in h) for h in e.heaps[:4])
    return per + (f"; +{len(e.heaps) - 4} more processes" if len(e.heaps) > 4 else "")


def heaps_cell(e: VariantEvidence):
    """Per process (the first four), each arena's resident KiB; how many arenas is how many numbers."""
    if e.heaps is None:
        return "not read (malloc is not glibc's)" if e.malloc_object else Num(None)
    per = tuple(Seq(tuple(Num(b / 1024, "KiB") for b in h), ", ") for h in e.heaps[:4])
    if len(e.heaps) > 4:
        per += (f"+{len(e.heaps) - 4} more",)
    return Seq(per, "; ")


class ThreadHeap(Case):
    name = "thread-heap"
    seed = "002"
    summary = "threads vs processes building a std::vector: local vs thread_local vs static, glibc arenas and tunables"
    question = ("T workers each build a std::vector many times. Are threads slower than the same work in T "
                "processes (flat MPI)? Does making the vector thread_local (or a static per-worker vector) change "
                "that? What do futex calls, context switches and glibc's arenas show, and how do arena_max, "
                "mmap_threshold and trim_threshold move it?")
    params = (
        Param("threads", max(2, min(os.cpu_count() or 2, 16)), 1, 256, "workers (threads, or processes)"),
        Param("calls", 20000, 1, 1 << 40, "calls per worker"),
        Param("elems", 4096, 1, 1 << 28, "ints pushed into the vector per call"),
        Param("forms", thread_heap.FORMS, help="vector forms", kind="choices", choices=thread_heap.FORMS),
        Param("modes", thread_heap.MODES, help="threads and/or processes", kind="choices", choices=thread_heap.MODES),
        Param("tunables", tuple(TUNABLES), help="glibc tunable settings (glibc only)", kind="choices",
              choices=tuple(TUNABLES)),
    )
    default_allocators = ("glibc", "mimalloc")
    default_reps = 6

    def variants(self, values, facts) -> list[Variant]:
        common = {k: values[k] for k in ("threads", "calls", "elems")}
        return [tunable_variant({"form": f, "mode": m}, TUNABLES[t], thread_heap.WORKLOAD,
                                common | {"form": f, "mode": m})
                for t in values["tunables"] for f in values["forms"] for m in values["modes"]]

    def analyse(self, run: StoredRun) -> CaseResult:
        ev = [_evidence(c) for c in run.cells]
        index = Readings({(e.allocator, e.tunables, e.form, e.mode): e for e in ev})
        rows = []
        for e in ev:
            procs = index[e.allocator, e.tunables, e.form, "processes"]
            vs = Ratio(ratio(e, procs)) if e.mode == "threads" and procs else "-"
            rows.append([e.allocator, e.tunables, e.form, e.mode, Num(e.per_call, "ns"), vs,
                         Num(e.futex_per_kcall, "", ",.2f"), Num(e.cs_per_kcall, "", ",.2f"),
                         Num(e.maps_per_kcall, "", ",.2f"), percent_of(e.sys_share), heaps_cell(e), e.status])
        workers = params_of(run.cells[0].params, CELL_PARAMS)["threads"] if run.cells else "?"
        table = CaseTable(
            f"{workers} workers (median over runs)",
            ["allocator", "tunables", "form", "mode", "time per call", "threads / processes (paired)",
             "futex per 1k calls", "context switches per 1k calls", "mmap+munmap per 1k calls", "sys share",
             "arenas per process (resident, main first)", "status"],
            rows,
            notes=["time per call = region main's wall time / calls per worker (the workers run at once). Counts are "
                   "region main's, inherited by every thread and process. Ratios: median of per-round ratios with "
                   "a 95% CI (order statistics; none below 6 rounds). Arenas: each process's glibc arenas at its "
                   "exit, resident KiB of each (the main arena's brk heap, then the others' heaps, from mincore), from "
                   "the heap accounting of the cell's explaining run."])
        return CaseResult(self.question, [table], self._statements(ev, index))

    def _statements(self, ev: list[VariantEvidence], index: dict) -> list[str]:
        out = []
        for e in ev:
            if e.per_call is None:
                out.append(f"{e.where}, {e.form}, {e.mode}: no successful run ({e.status}).")
        for e in (x for x in ev if x.mode == "threads" and x.per_call is not None):
            procs = index[e.allocator, e.tunables, e.form, "processes"]
            if procs is None or procs.per_call is None:
                continue
            r = ratio(e, procs)
            v = stats.verdict(r, CASE_NOISE) if r is not None else None
            busy = (e.futex_per_kcall or 0) >= FUTEX_PER_KOP
            if e.tunables != "default" and not busy and (v is None or v.kind == "unresolved"):
                continue  # the table has it; a statement per tunable only when something was resolved
            verdict = v.text if v is not None else "no paired rounds"
            text = (f"{e.where}, {e.form}: threads took {e.per_call:,.0f} ns per call, processes "
                    f"{procs.per_call:,.0f} ns; threads against processes: {verdict}")
            if busy:
                text += (f"; the threads made {e.futex_per_kcall:,.1f} futex calls and {e.cs_per_kcall or 0:,.1f} "
                         f"context switches per 1,000 calls (processes: {procs.futex_per_kcall or 0:,.2f} futex "
                         f"calls): they entered the kernel to wait for or wake each other")
                if e.heaps:
                    threads = params_of(e.cell.params, CELL_PARAMS)["threads"]
                    text += f", with {len(e.heaps[0])} arena(s) for {threads} threads"
            out.append(text + ".")
        for e in (x for x in ev if x.form != "local" and x.tunables == "default" and x.per_call is not None):
            local = index[e.allocator, e.tunables, "local", e.mode]
            if local is None or local.per_call is None:
                continue
            r = ratio(e, local)
            verdict = stats.verdict(r, CASE_NOISE).text if r is not None else "no paired rounds"
            out.append(f"{e.where}, {e.mode}: the {e.form} vector took {e.per_call:,.0f} ns per call against "
                       f"{local.per_call:,.0f} ns for the function-local one: {verdict}.")
        for e in ev:
            if e.heaps is not None and e.form == "local" and e.per_call is not None and \
                    (e.tunables == "default" or "arena" in e.tunables):
                n = [len(h) for h in e.heaps]
                out.append(f"{e.where}, {e.mode}: the heap accounting found {', '.join(map(str, n))} glibc arena(s) "
                           f"{'per process' if e.mode == 'processes' else 'in the process'} "
                           f"(resident per arena, the main one first: {_heaps_words(e)}).")
            elif e.heaps is None and e.malloc_object and e.form == "local" and e.mode == "threads":
                out.append(f"{e.where}: malloc was served by {e.malloc_object}, not glibc's arenas; no arena "
                           f"evidence.")
        unchanged = []
        for e in ev:
            base = index[e.allocator, "default", e.form, e.mode]
            if e.tunables == "default" or e.form != "local" or base is None or e.maps_per_kcall is None \
                    or base.maps_per_kcall is None:
                continue
            pairs = ((e.maps_per_kcall, base.maps_per_kcall), (e.futex_per_kcall or 0, base.futex_per_kcall or 0))
            if any(_moved(a, b) for a, b in pairs):
                out.append(f"{e.where}, {e.mode}: {e.maps_per_kcall:,.2f} mmap+munmap and "
                           f"{e.futex_per_kcall or 0:,.2f} futex calls per 1,000 calls against "
                           f"{base.maps_per_kcall:,.2f} and {base.futex_per_kcall or 0:,.2f} with default tunables.")
            else:
                unchanged.append(f"{e.where} ({e.mode})")
        if unchanged:
            out.append(f"No change beyond 2x (and 0.5 per 1,000 calls) in mmap+munmap or futex calls against the "
                       f"default tunables: {', '.join(unchanged)}.")
        return out


def _moved(a: float, b: float) -> bool:
    """A count rate changed: by more than 2x and by more than 0.5 per 1,000 calls."""
    return abs(a - b) > 0.5 and (min(a, b) == 0 or max(a, b) / min(a, b) > 2)


CASE = ThreadHeap()
