"""cache-flush (seed 004): clflush vs clflushopt vs clwb vs memset vs non-temporal stores.

Each primitive runs over a buffer in timed passes, fenced as the architecture requires for the
flush to be complete (CLFLUSHOPT and CLWB by SFENCE, CLFLUSH by MFENCE). Support comes from
CPUID, read by the workload itself before planning: an instruction the CPU lacks is listed as
"not supported on this CPU" and never executed.
"""
from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass

from memsleuth.measure import native
from memsleuth import stats
from memsleuth.analysis.summary import cell_view
from memsleuth.cases.base import (CASE_NOISE, Case, CaseFigure, CaseResult, CaseTable, Num, Variant, median_text,
    params_of, percent_of, result_rows, status_text)
from memsleuth.stats import median_of as med
from memsleuth.errors import UsageError
from memsleuth.records.model import Readings
from memsleuth.records.stored import StoredCell, StoredRun
from memsleuth.measure.workloads import cache_flush
from memsleuth.measure.workloads.base import Param

FENCE = {"clflush": "mfence", "clflushopt": "sfence", "clwb": "sfence", "memset": "-", "nt-store": "sfence"}
CPUID_FLAG = {"clflush": "clflush", "clflushopt": "clflushopt", "clwb": "clwb", "nt-store": "sse2"}
LINE_BYTES = 64
# The pairs whose ratio the case reports: (op, reference).
PAIRS = (("clflushopt", "clflush"), ("clwb", "clflushopt"), ("nt-store", "memset"), ("clflushopt", "memset"))


def detect_cpu() -> dict:
    """What CPUID says, from `cache-flush --op=detect` (the same code that guards execution)."""
    try:
        out = subprocess.run([str(native.native_path("cache-flush")), "--op=detect"], capture_output=True, text=True,
                             timeout=30, check=True).stdout
        return json.loads(out)["cpu"]
    except (OSError, subprocess.SubprocessError, ValueError, KeyError) as e:
        raise UsageError(f"cache-flush: cannot read the CPU's features: {e}") from None


@dataclass
class OpEvidence:
    cell: StoredCell
    op: str
    allocator: str
    n_bytes: int
    gbs_by_round: dict[int, float]       # per run: the median pass
    faults_per_pass: float | None
    sys_share: float | None
    unsupported: str | None
    status: str

    @property
    def gbs(self) -> float | None:
        return med(self.gbs_by_round.values())


# What the analysis reads of a cell's parameters and of the run's facts (CacheFlush.prepare).
CELL_PARAMS = {"bytes": 0, "op": None, "dirty": 1}
FACTS = {"cpuid": {}, "unsupported": {}}


def _evidence(cell: StoredCell) -> OpEvidence:
    params = params_of(cell.params, CELL_PARAMS)
    n = int(params["bytes"])
    by_round = {}
    faults, shares = [], []
    for r, s in cell.measured():
        passes = [x for x in s.regions if x.name == "op"] if s.ok else []
        if passes:
            by_round[r] = med(n / x.wall_ns for x in passes if x.wall_ns)
            faults.append(med(x.minflt for x in passes))
            shares.append(med(x.sys_ns / (x.user_ns + x.sys_ns) for x in passes if x.user_ns + x.sys_ns))
    refused = next((r["reason"] for s in cell_view(cell).samples
                    if (r := params_of(s.result or {}, {"supported": None, "reason": None}))["supported"] is False),
                   None)
    return OpEvidence(cell, str(params["op"]), cell.allocator.name, n, by_round, med(faults), med(shares),
                      refused, status_text(cell))


def _show_gbs(v: float) -> str:
    return f"{v:.2f} GB/s"


def paired(a: OpEvidence, b: OpEvidence) -> stats.Estimate | None:
    """a's time per pass over b's (> 1: a is slower), paired by round: time ratio = b's GB/s / a's."""
    return stats.paired_by_round(b.gbs_by_round, a.gbs_by_round)


class CacheFlush(Case):
    name = "cache-flush"
    seed = "004"
    summary = "bandwidth of clflush, clflushopt, clwb (fenced), memset and non-temporal stores; CPUID-checked"
    question = ("How fast do cache-line flush and write-back instructions go over a buffer, fenced so that the "
                "flush is complete, next to memset and non-temporal stores? Which of them does this CPU have?")
    params = (
        Param("bytes", 128 << 20, 4096, 1 << 40, "buffer size", kind="size"),
        Param("passes", 8, 1, 1_000_000, "timed passes per run"),
        Param("dirty", 1, 0, 1, "1: write the buffer before each flush pass, outside the timed region"),
        Param("ops", cache_flush.OPS, help="which primitives", kind="choices", choices=cache_flush.OPS),
    )
    default_allocators = ("glibc",)
    default_reps = 6

    def prepare(self, values) -> dict:
        cpu = detect_cpu()
        unsupported = {op: f"CPUID does not report {CPUID_FLAG[op].upper()}" for op in values["ops"]
                       if op in CPUID_FLAG and not cpu.get(CPUID_FLAG[op])}
        return {"cpuid": cpu, "unsupported": unsupported}

    def variants(self, values, facts) -> list[Variant]:
        skip = params_of(facts, FACTS)["unsupported"]
        return [Variant({"op": op}, cache_flush.WORKLOAD,
                        {"op": op, "bytes": values["bytes"], "passes": values["passes"], "dirty": values["dirty"]})
                for op in values["ops"] if op not in skip]

    def analyse(self, run: StoredRun) -> CaseResult:
        ev = [_evidence(c) for c in run.cells]
        facts = params_of(run.spec.facts, FACTS)
        several = len({e.allocator for e in ev}) > 1
        rows = []
        for e in ev:
            line_ns = LINE_BYTES / e.gbs if e.gbs else None
            rows.append([e.op, FENCE.get(e.op, "-"), *([e.allocator] if several else []),
                         Num(e.gbs, "GB/s", ".2f"), Num(line_ns, "ns", ".2f"), Num(e.faults_per_pass),
                         percent_of(e.sys_share),
                         e.status if not e.unsupported else f"not supported on this CPU ({e.unsupported})"])
        for op, why in facts["unsupported"].items():
            rows.append([op, FENCE.get(op, "-"), *(["-"] if several else []), "-", "-", "-", "-",
                         f"not supported on this CPU ({why}); never executed"])
        params = params_of(run.spec.case_params, CELL_PARAMS)
        n, dirty, cpu = int(params["bytes"]), params["dirty"], facts["cpuid"]
        table = CaseTable(
            f"Over a {n / (1 << 20):,.0f} MiB buffer (median pass per run, median over runs)",
            ["op", "fence (timed)", *(["allocator"] if several else []), "bandwidth", "time per 64-B line",
             "faults per pass", "sys share", "status"],
            rows,
            notes=["CPUID: " + ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in cpu.items()) + ". "
                   + ("Each flush pass runs on a buffer written just before, outside the timed region (--param dirty=0: "
                      "flush lines already flushed)." if dirty else "Flush passes run on lines already flushed "
                                                                      "(dirty=0), as in the seed's loop.")
                   + " GB/s = buffer bytes / pass wall time (10^9 B/s)."])
        fig = CaseFigure(f"Bandwidth over a {n / (1 << 20):,.0f} MiB buffer, per operation", "GB/s",
                         result_rows((f"{e.op} ({e.allocator})" if several else e.op, e.gbs_by_round) for e in ev))
        return CaseResult(self.question, [table], self._statements(ev, facts), [fig] if fig.rows else [])

    def _statements(self, ev: list[OpEvidence], facts: dict) -> list[str]:
        out = []
        for op, why in facts["unsupported"].items():
            out.append(f"{op}: not supported on this CPU ({why}), so it was never executed.")
        by_op = Readings({(e.op, e.allocator): e for e in ev})
        for e in ev:
            if e.gbs is None:
                out.append(f"{e.op}: no successful run ({e.unsupported or e.status}).")
        for a_op, b_op in PAIRS:
            for alloc in dict.fromkeys(e.allocator for e in ev):
                a, b = by_op[a_op, alloc], by_op[b_op, alloc]
                if not a or not b or not a.gbs or not b.gbs:
                    continue
                r = paired(a, b)
                verdict = stats.verdict(r, CASE_NOISE).text if r is not None else "no paired rounds"
                out.append(f"{a_op} + {FENCE[a_op]} ran at {median_text(a.gbs_by_round, _show_gbs)} "
                           f"({LINE_BYTES / a.gbs:.2f} ns per line at the median), "
                           f"{b_op}{' + ' + FENCE[b_op] if FENCE[b_op] != '-' else ''} at "
                           f"{median_text(b.gbs_by_round, _show_gbs)}: {a_op} against {b_op}: {verdict}.")
        faulted = [e for e in ev if (e.faults_per_pass or 0) > 0]
        clean = [e.op for e in ev if e.gbs is not None and e not in faulted]
        if clean:
            out.append(f"No page faults in the timed passes of {', '.join(clean)}: the buffer was touched before "
                       f"timing, so the figures are the instructions', not first touch's.")
        for e in faulted:
            out.append(f"{e.op}: {e.faults_per_pass:,.0f} page faults per timed pass; its figure includes them.")
        return out


CASE = CacheFlush()
