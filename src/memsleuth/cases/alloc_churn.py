"""alloc-churn (seed 000): why a step loop ran 2x faster when one small buffer leaked.

The loop mallocs several MiB of buffers per step, initialises them, times a compute over them
and frees them. Per step and per region the case measures faults, brk/mmap/munmap/madvise calls
and how far the program break moved, and names the mechanism those numbers show: heap-top
trimming (the break moves down in `free`, then the next step faults the pages again),
mmap/munmap of the large blocks, or purging by madvise. Then it says which variant or glibc
tunable removed it, by the same numbers.
"""
from __future__ import annotations

from dataclasses import dataclass

from memsleuth.analysis.summary import cell_view
from memsleuth.cases.base import (Case, CaseResult, CaseTable, Num, Seq, Tunable, Variant, median_text, mib_of, ms_of,
    paired, params_of, per_run, ratio_text, status_text, tunable_variant)
from memsleuth.analysis.cost import REFAULT_SHARE
from memsleuth.analysis.findings.heap_trim import MIN_SHRINK_PER_STEP, MIN_SHRINKING_SHARE
from memsleuth.analysis.findings.mmap_churn import MUNMAP_PER_STEP
from memsleuth.analysis.view import typical_step
from memsleuth.units import PAGE_BYTES, fmt_mib, fmt_num as fmt
from memsleuth.records.model import Readings
from memsleuth.records.stored import StoredCell, StoredRun
from memsleuth.measure.workloads import alloc_churn
from memsleuth.measure.workloads.base import Param

REGIONS = ("alloc", "init", "target", "free")
SYSCALLS = ("brk", "mmap", "munmap", "madvise")
# glibc tunables swept (GLIBC_TUNABLES); each value is shown in the tables as it is set.
TUNABLES: dict[str, Tunable] = {
    "default": None,
    "mmap_threshold": ("mmap_threshold=128K", "glibc.malloc.mmap_threshold=131072"),
    "trim_threshold": ("trim_threshold=1G", "glibc.malloc.trim_threshold=1073741824"),
    "top_pad": ("top_pad=64M", "glibc.malloc.top_pad=67108864"),
    "tcache_count": ("tcache_count=0", "glibc.malloc.tcache_count=0"),
}
# The mechanisms are named by the rules' own thresholds (one per mechanism in the project):
# - a step re-faults when its faults reach cost.REFAULT_SHARE of the pages it allocates;
# - the heap top is trimmed when the break moves down at least heap_trim.MIN_SHRINK_PER_STEP per
#   step in region free, in at least heap_trim.MIN_SHRINKING_SHARE of the steps after the first;
# - the large blocks are mapped and unmapped at mmap_churn.MUNMAP_PER_STEP munmap calls per step;
# - purging by madvise is named at one call per step or more (the madvise rule itself decides by
#   cost alone, findings/madvise_storm.py; here the calls are named, not judged).
MADVISE_PER_STEP = 1.0


@dataclass
class CellEvidence:
    cell: StoredCell
    allocator: str
    tunables: str
    variant: str
    step_bytes: int
    nbuf: int
    steps: int | None
    faults: dict[str, float | None]           # per region, per step
    wall_ns: dict[str, float | None]
    calls: dict[str, float | None]            # per step, summed over the regions
    free_brk_delta: float | None              # bytes per step, negative = moved down
    alloc_brk_delta: float | None
    shrinking_steps: int | None
    status: str

    @property
    def total_faults(self) -> float | None:
        vals = [v for v in self.faults.values() if v is not None]
        return sum(vals) if vals else None

    @property
    def pages(self) -> float:
        return self.step_bytes / PAGE_BYTES

    @property
    def refaults(self) -> bool:
        return (self.total_faults or 0) >= REFAULT_SHARE * self.pages

    @property
    def step_wall_ns(self) -> float | None:
        vals = [v for v in self.wall_ns.values() if v is not None]
        return sum(vals) if len(vals) == len(REGIONS) else None

    @property
    def top_region(self) -> str | None:
        known = {k: v for k, v in self.faults.items() if v is not None}
        return max(known, key=known.get) if known else None

    @property
    def name(self) -> str:
        t = "" if self.tunables == "default" else f", {self.tunables}"
        return f"{self.allocator}{t}, {self.variant}"


# What the analysis reads of a cell's parameters.
CELL_PARAMS = {"sizes": "4194304", "nbuf": 8, "tunables": "default", "variant": None, "steps": None}


def _evidence(cell: StoredCell) -> CellEvidence:
    view = cell_view(cell)
    params = params_of(cell.params, CELL_PARAMS)
    sizes = [int(s) for s in str(params["sizes"]).split(",")]
    nbuf = int(params["nbuf"])
    step_bytes = sum(sizes[i % len(sizes)] for i in range(nbuf))
    calls = Readings()
    for sc in SYSCALLS:
        per_region = [view.step(r, lambda x, sc=sc: x.syscalls[sc] if sc in x.syscalls else None) for r in REGIONS]
        calls[sc] = sum(v for v in per_region if v is not None) if any(v is not None for v in per_region) else None
    return CellEvidence(
        cell=cell, allocator=cell.allocator.name, tunables=str(params["tunables"]),
        variant=str(params["variant"]), step_bytes=step_bytes, nbuf=nbuf,
        steps=int(params["steps"]) if params["steps"] is not None else None,
        faults={r: view.step(r, lambda x: x.minflt) for r in REGIONS},
        wall_ns={r: view.step(r, lambda x: x.wall_ns) for r in REGIONS},
        calls=calls,
        free_brk_delta=view.step("free", lambda x: x.brk_delta_bytes),
        alloc_brk_delta=view.step("alloc", lambda x: x.brk_delta_bytes),
        shrinking_steps=view.step_count("free", lambda x: (x.brk_delta_bytes or 0) < 0),
        status=status_text(cell))


def mechanism(e: CellEvidence) -> str:
    """What the numbers of one cell show, quoting them."""
    faults = e.total_faults
    if faults is None:
        return "no successful run to read"
    share = f"{faults:,.0f} faults per step for {e.pages:,.0f} pages allocated per step"
    if not e.refaults:
        return f"memory is reused: {share}"
    where = f", taken in region {e.top_region} ({e.faults[e.top_region]:,.0f})" if e.top_region else ""
    causes = []
    shrink = -(e.free_brk_delta or 0)
    shrinking = e.shrinking_steps if e.shrinking_steps is not None else 0
    if shrink >= MIN_SHRINK_PER_STEP and (not e.steps or shrinking >= MIN_SHRINKING_SHARE * (e.steps - 1)):
        steps = f" in {e.shrinking_steps} of {e.steps - 1} steps after the first" if e.steps else ""
        causes.append(f"heap-top trimming: the program break moved down {fmt_mib(shrink)} per step in region "
                      f"free{steps}, with {fmt(e.calls['brk'], ',.0f')} brk calls per step")
    if (e.calls["munmap"] or 0) >= MUNMAP_PER_STEP:
        causes.append(f"mmap/munmap of the large blocks: {fmt(e.calls['mmap'], ',.0f')} mmap and "
                      f"{fmt(e.calls['munmap'], ',.0f')} munmap calls per step")
    if (e.calls["madvise"] or 0) >= MADVISE_PER_STEP:
        causes.append(f"purging by madvise: {fmt(e.calls['madvise'], ',.0f')} madvise calls per step")
    if not causes:
        counted = ", ".join(f"{k} {fmt(v, ',.0f')}" for k, v in e.calls.items())
        causes.append(f"no brk shrink, munmap or madvise explains it (calls per step: {counted or 'not counted'})")
    return f"every step re-faults its memory: {share}{where}; " + "; ".join(causes)


def call_sites(e: CellEvidence) -> list[str]:
    """Where the re-faulting cell's brk/munmap/madvise calls and page faults come from (records/sites.py)."""
    if not e.refaults or not e.cell.where:
        return []
    from memsleuth.records import sites
    events = [s for s in ("brk", "munmap", "madvise") if (e.calls[s] or 0) >= 1] + ["page-faults"]
    return [line for s in events for line in sites.lines_for(e.cell.where, s)]


class AllocChurn(Case):
    name = "alloc-churn"
    seed = "000"
    summary = "a step loop that mallocs and frees MiB buffers: which mechanism re-faults every step, and what removes it"
    question = ("A benchmark loop allocates, initialises, computes on and frees several MiB of buffers every "
                "step. Does every step fault its memory in again, by which mechanism (heap-top trimming, "
                "mmap/munmap of large blocks, purging by madvise), which region pays for it, and which "
                "variant or glibc tunable removes it?")
    params = (
        Param("steps", 10, 2, 1 << 20, "steps of the loop"),
        Param("nbuf", 8, 1, 4096, "large buffers per step"),
        Param("sizes", str(4 << 20), 64, 1 << 36, "buffer sizes, cycled over the buffers (like 4M or 4M,1M)",
              kind="sizes"),
        Param("small", 800, 1, 1 << 30, "the small buffer allocated last, bytes", kind="size"),
        Param("variants", alloc_churn.VARIANTS, help="which loop variants", kind="choices",
              choices=alloc_churn.VARIANTS),
        Param("tunables", tuple(TUNABLES), help="glibc tunable settings (glibc only)", kind="choices",
              choices=tuple(TUNABLES)),
    )
    default_allocators = ("glibc", "mimalloc")
    default_reps = 6    # the fewest rounds whose medians and paired ratios have a 95% CI

    def variants(self, values, facts) -> list[Variant]:
        common = {k: values[k] for k in ("steps", "nbuf", "sizes", "small")}
        # The seed's own loop (free-all, default tunables) is explained down to its call sites.
        return [tunable_variant({"variant": v}, TUNABLES[t], alloc_churn.WORKLOAD, common | {"variant": v},
                                where=(t == "default" and v == "free-all"))
                for t in values["tunables"] for v in values["variants"]]

    def analyse(self, run: StoredRun) -> CaseResult:
        ev = [_evidence(c) for c in run.cells]
        rows = []
        for e in ev:
            rows.append([e.allocator, e.tunables, e.variant, ms_of(e.step_wall_ns), ms_of(e.wall_ns["target"]),
                         Seq(tuple(Num(e.faults[r]) for r in REGIONS)), Seq(tuple(Num(e.calls[s]) for s in SYSCALLS)),
                         mib_of(e.alloc_brk_delta, signed=True), mib_of(e.free_brk_delta, signed=True), e.status])
        first = ev[0] if ev else None
        table = CaseTable(
            "Per step (median step after the first, median over runs; the statements give the 95% CIs)",
            ["allocator", "tunables", "variant", "step time", "target time",
             "page faults: " + " / ".join(REGIONS), "calls: " + " / ".join(SYSCALLS),
             "break moved in alloc", "break moved in free", "status"],
            rows,
            notes=[f"Each step allocates {first.nbuf} buffers, {fmt_mib(first.step_bytes)} in all "
                   f"({first.pages:,.0f} pages of {PAGE_BYTES} B); calls are per step over all four regions."]
            if first else [])
        return CaseResult(self.question, [table], self._statements(ev))

    def _statements(self, ev: list[CellEvidence]) -> list[str]:
        out = []
        groups: dict[tuple[str, str], Readings] = {}
        for e in ev:
            groups.setdefault((e.allocator, e.tunables), Readings())[e.variant] = e
        default_free_all = Readings({a: g["free-all"] for (a, t), g in groups.items() if t == "default"})
        for (alloc, tun), by_variant in groups.items():
            base = by_variant["free-all"]
            for variant, e in by_variant.items():
                if e.total_faults is None:
                    out.append(f"{e.name}: no successful run ({e.status}).")
                    continue
                text = f"{e.name}: {mechanism(e)}."
                sites = call_sites(e)
                if sites:
                    text += " Call sites: " + "; ".join(sites) + "."
                if base is not None and e is not base and base.total_faults is not None:
                    text += " " + _against(e, base, "free-all", judge=variant != "target-first-touch")
                elif e is base and tun != "default" and default_free_all[alloc] is not None:
                    text += " " + _against(e, default_free_all[alloc], f"{alloc} with default tunables")
                out.append(text)
        return out


def _against(e: CellEvidence, ref: CellEvidence, ref_name: str, judge: bool = True) -> str:
    """How a variant differs from its reference, by faults per step and the timed region.

    judge: say whether the variant removed the re-faulting (target-first-touch is there to show
    who pays for the faults, not to remove them)."""
    parts = []
    if not judge:
        pass
    elif ref.refaults and not e.refaults:
        parts.append(f"Against {ref_name} ({ref.total_faults:,.0f} faults per step) this removed the re-faulting")
    elif ref.refaults and e.refaults:
        parts.append(f"It did not remove the re-faulting ({ref_name}: {ref.total_faults:,.0f} faults per step)")
    elif not ref.refaults and e.refaults:
        parts.append(f"It introduced re-faulting ({ref_name}: {ref.total_faults:,.0f} faults per step)")
    t, t0 = e.wall_ns["target"], ref.wall_ns["target"]
    if t and t0:
        ft = e.faults["target"] or 0
        paid = (f"; region target took {ft:,.0f} faults per step, so the timed region paid for first touch"
                if ft >= REFAULT_SHARE * e.pages else "")

        def step(s):
            return typical_step([s], "target", lambda x: x.wall_ns)

        def show(v):
            return f"{v / 1e6:,.2f} ms"
        parts.append(f"target took {median_text(per_run(e.cell, step), show)} per step against "
                     f"{median_text(per_run(ref.cell, step), show)} "
                     f"(paired by round: {ratio_text(paired(e.cell, ref.cell, step))}){paid}")
    return "; ".join(parts) + "." if parts else ""


CASE = AllocChurn()
