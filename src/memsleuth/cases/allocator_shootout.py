"""allocator-shootout (seed 003): the whole allocator comparison in one command.

An allocator was 27x slower than mimalloc; perf stat and strace -c showed 1,081 madvise calls
making 92% of its system time, and it hit OOM at 10M iterations and SEGFAULT at ws=40000. The
case runs random-mixed across working-set sizes, plus a long run and a large working set, for
every allocator, with failures recorded as results, and reads the evidence with the findings
rules (madvise storm, heap-trim and mmap churn, first touch, ...).
"""
from __future__ import annotations

from memsleuth.analysis.summary import CellSummary, analyse, failure_label
from memsleuth.cases.base import Case, CaseResult, CaseTable, Num, Variant, mib_of, params_of, percent_of
from memsleuth.analysis.findings import unstable as unstable_rule
from memsleuth.records.stored import StoredRun
from memsleuth.measure.workloads import random_mixed
from memsleuth.measure.workloads.base import Param


# What the analysis reads of a cell's parameters.
CELL_PARAMS = {"iterations": 0, "threads": 1, "run": "", "ws": 0}


def _per_kop(c: CellSummary, value: float | None) -> float | None:
    params = params_of(c.cell.params, CELL_PARAMS)
    ops = int(params["iterations"]) * int(params["threads"])
    return 1000 * value / ops if value is not None and ops else None


class AllocatorShootout(Case):
    name = "allocator-shootout"
    seed = "003"
    summary = "every allocator on random-mixed across working sets, a long run and a large working set; failures are results"
    question = ("Which allocator is fastest on random malloc/free across working-set sizes, by how much (paired "
                "ratios with CIs), and why: system time, page faults, madvise/mmap/munmap/brk calls? Which ones "
                "run out of memory, crash or time out on a long run or a large working set?")
    params = (
        Param("iterations", 1_000_000, 1, 1 << 40, "operations per run of the sweep"),
        Param("ws", "400,4000,10000,40000", 1, 1 << 28, "working-set sizes of the sweep (slots)", kind="counts"),
        Param("long-iterations", 10_000_000, 1, 1 << 40, "operations of the long run"),
        Param("long-ws", 40_000, 1, 1 << 28, "working set of the long run (40000 or more: seed 003's crash)"),
    )
    default_allocators = None
    default_reps = 6
    warmup = 1

    def variants(self, values, facts) -> list[Variant]:
        sweep = [int(w) for w in str(values["ws"]).split(",")]
        runs = [(values["iterations"], ws, "sweep") for ws in sweep]
        runs.append((values["long-iterations"], values["long-ws"], "long"))
        # The long run is explained down to its call sites: a finding there names where its calls come from.
        return [Variant({"run": kind, "ws": str(ws), "iterations": str(it)}, random_mixed.WORKLOAD,
                        {"iterations": it, "ws": ws}, where=(kind == "long")) for it, ws, kind in runs]

    def analyse(self, run: StoredRun) -> CaseResult:
        groups = analyse(run)
        rows = []
        for g in groups:
            for c in g.cells:
                e, est = c.evidence, c.estimate
                vs = "fastest" if c.is_best else (c.verdict.text if c.verdict else "-")
                params = params_of(c.cell.params, CELL_PARAMS)
                rows.append([params["run"], Num(int(params["ws"])),
                             Num(int(params["iterations"])), c.cell.allocator.name,
                             Num(est.median / 1e6 if est else None, "Mops/s", ",.2f"), vs, percent_of(e.sys_share),
                             Num(_per_kop(c, e.syscalls["madvise"]), "", ",.2f"),
                             Num(_per_kop(c, sum(e.syscalls[k] or 0 for k in ("mmap", "munmap", "brk"))
                                          if e.syscalls else None), "", ",.2f"),
                             Num(_per_kop(c, e.minflt), "", ",.2f"),
                             mib_of(e.maxrss_kb * 1024 if e.maxrss_kb is not None else None),
                             c.label if not c.failures or not c.ok_samples else
                             f"{len(c.failures)} of {len(c.failures) + len(c.ok_samples)} failed"])
        table = CaseTable(
            "random-mixed: region main (median over runs)",
            ["run", "ws (slots)", "iterations", "allocator", "throughput", "vs fastest (paired)", "sys share",
             "madvise per 1k ops", "mmap+munmap+brk per 1k ops", "faults per 1k ops", "peak RSS", "status"],
            rows,
            notes=["Throughput and counts are region main's (after the warm-up fills the working set); peak RSS is "
                   f"the whole process's. 'vs fastest': median of per-round ratios with a 95% CI, called beyond "
                   f"±{run.spec.noise:.0%}."])
        return CaseResult(self.question, [table], self._statements(groups))

    @staticmethod
    def _statements(groups) -> list[str]:
        out = []
        unstable = []
        for g in groups:
            params = params_of(g.cells[0].cell.params, CELL_PARAMS)
            where = f"ws={params['ws']}, {int(params['iterations']):,} ops"
            ok = [c for c in g.cells if c.estimate is not None]
            best = next((c for c in ok if c.is_best), None)
            if best:
                text = (f"{where}: {best.cell.allocator.name} was fastest at "
                        f"{best.estimate.median / 1e6:,.2f} Mops/s")
                slower = [c for c in ok if c.verdict and c.verdict.kind == "slower"]
                if slower:
                    worst = max(slower, key=lambda c: c.ratio.median)
                    sys = worst.evidence.sys_share
                    text += (f"; the slowest, {worst.cell.allocator.name}, was {worst.verdict.text}"
                             + (f", with {100 * sys:.0f}% of its CPU time in the kernel" if sys is not None else ""))
                unresolved = [c.cell.allocator.name for c in ok if c.verdict and c.verdict.kind == "unresolved"]
                if unresolved:
                    text += f"; no difference resolved from {', '.join(unresolved)}"
                out.append(text + ".")
            for c in g.cells:
                if c.failures:
                    kinds = sorted({failure_label(s) for s in c.failures})
                    detail = c.failures[0].detail or ""
                    out.append(f"{where}: {c.cell.allocator.name} ended {'/'.join(kinds)} in {len(c.failures)} of "
                               f"{len(c.failures) + len(c.ok_samples)} runs ({detail}); recorded as a result.")
                hw = c.estimate.half_width_rel if c.estimate else None
                if hw is not None and hw > unstable_rule.CI_HALF_WIDTH:   # one line for all of them, below
                    unstable.append(f"{c.cell.allocator.name} at {where} (±{hw:.0%})")
                for f in c.findings + c.pair_findings:
                    sites = f" Call sites: {'; '.join(f.call_sites)}." if f.call_sites else ""
                    out.append(f"{where}: {c.cell.allocator.name}: {f.title} — {f.mechanism} "
                               f"({'; '.join(f.evidence)}).{sites}")
        if unstable:
            out.append(f"Unstable measurement (95% CI half-width above ±{unstable_rule.CI_HALF_WIDTH:.0%}), so smaller "
                       "differences involving them "
                       f"are not resolved: {', '.join(unstable)}.")
        return out


CASE = AllocatorShootout()
