"""first-touch (seed 001): a 1 GiB memcpy measured 7.7x too slow, because its memory was fresh.

Memory from malloc (or mmap) is not backed until first touch: a timed copy into it takes one
page fault per 4 KiB page. The case copies N bytes after six ways of preparing the memory and
shows, for each, the bandwidth, the faults inside the timed region, the setup's own cost and
RSS around the copy. It also flags the zero-page trap: a source never written maps the shared
zero page, so its reads fault without adding resident memory, and later copies from it read
one cached page and look too fast.
"""
from __future__ import annotations

from dataclasses import dataclass

from memsleuth.analysis.findings.zero_page import MAX_RSS_PER_FAULT
from memsleuth.analysis.summary import cell_view
from memsleuth.cases.base import (CASE_NOISE, Case, CaseFigure, CaseResult, CaseTable, Num, Seq, Variant, median_text,
    mib_of, ms_of, paired, params_of, per_run, ratio_text, resolved_above, result_rows, status_text)
from memsleuth.stats import median_of
from memsleuth.units import PAGE_BYTES, fmt_mib, fmt_ms, gb_per_s
from memsleuth.records.model import Readings
from memsleuth.records.stored import StoredCell, StoredRun
from memsleuth.measure.workloads import first_touch
from memsleuth.measure.workloads.base import Param

# A copy "faults its pages" when its faults reach half the pages copied; "took none" below 10%.
FAULTED_SHARE = 0.5
CLEAN_SHARE = 0.10
# Zero-page trap: the zero_page rule's one threshold, applied to the source's pages: at most
# MAX_RSS_PER_FAULT of them added resident memory when the copy faulted them in (a read fault on
# never-written anonymous memory maps the zero page).
# Huge pages: a 2 MiB page is 512 base pages; fewer than 1 fault per 64 pages means most of the
# range was mapped by huge pages.
HUGE_PAGES_PER_FAULT = 64


@dataclass
class SetupEvidence:
    cell: StoredCell
    setup: str
    allocator: str
    n_bytes: int
    supported: bool
    reason: str | None
    copy_ns: float | None
    copy_faults: float | None
    again_ns: float | None
    again_faults: float | None
    source_ns: float | None
    setup_ns: float | None
    setup_faults: float | None
    rss_before_kb: float | None
    rss_after_kb: float | None
    status: str

    @property
    def pages(self) -> float:
        return self.n_bytes / PAGE_BYTES

    @property
    def copy_gbs(self) -> float | None:
        """The median over runs of each run's bandwidth (the figure the statements give a CI)."""
        return median_of(per_run(self.cell, _gbs(self, "copy")).values())

    @property
    def again_gbs(self) -> float | None:
        return median_of(per_run(self.cell, _gbs(self, "copy-again")).values())

    @property
    def zero_page_faults(self) -> float | None:
        """Faults in the copy that added no resident memory: zero-page mappings of the source."""
        if self.copy_faults is None or self.rss_before_kb is None or self.rss_after_kb is None:
            return None
        grown_pages = max(0.0, (self.rss_after_kb - self.rss_before_kb) * 1024 / PAGE_BYTES)
        return max(0.0, self.copy_faults - grown_pages)

    @property
    def zero_page(self) -> bool:
        z = self.zero_page_faults
        return z is not None and z >= (1 - MAX_RSS_PER_FAULT) * self.pages

    @property
    def name(self) -> str:
        return self.setup if self.allocator == "glibc" else f"{self.setup} ({self.allocator})"


def _gbs(e: SetupEvidence, region: str):
    """One run's bandwidth in a region: the bytes copied over its wall time."""
    def get(s):
        r = s.region(region)
        return gb_per_s(e.n_bytes, r.wall_ns) if r is not None and r.wall_ns else None
    return get


def _show_gbs(v: float) -> str:
    return f"{v:.2f} GB/s"


def _evidence(cell: StoredCell) -> SetupEvidence:
    view = cell_view(cell)
    results = [s.result for s in view.samples if s.result]
    unsupported = next((r for r in (params_of(r, {"supported": None, "reason": None}) for r in results)
                        if r["supported"] is False), None)
    params = params_of(cell.params, {"setup": None, "bytes": 0})
    return SetupEvidence(
        cell=cell, setup=str(params["setup"]), allocator=cell.allocator.name,
        n_bytes=int(params["bytes"]), supported=unsupported is None,
        reason=unsupported["reason"] if unsupported else None,
        copy_ns=view.region_value("copy", lambda r: r.wall_ns),
        copy_faults=view.region_value("copy", lambda r: r.minflt),
        again_ns=view.region_value("copy-again", lambda r: r.wall_ns),
        again_faults=view.region_value("copy-again", lambda r: r.minflt),
        source_ns=view.region_value("source", lambda r: r.wall_ns),
        setup_ns=view.region_value("setup", lambda r: r.wall_ns),
        setup_faults=view.region_value("setup", lambda r: r.minflt),
        rss_before_kb=view.region_value("copy", lambda r: r.rss_start_kb),
        rss_after_kb=view.region_value("copy", lambda r: r.rss_end_kb),
        status=status_text(cell))


class FirstTouch(Case):
    name = "first-touch"
    seed = "001"
    summary = "a timed memcpy into fresh memory pays one fault per page; six setups, and the zero-page trap"
    question = ("How fast is a copy of N bytes really, and how much of a naive measurement is page faults? "
                "For each way of preparing the memory: the bandwidth, the faults inside the timed copy, what "
                "the setup itself costs, and RSS around the copy. Does a source that was never written make "
                "copies look too fast?")
    params = (
        Param("bytes", 1 << 30, 4096, 1 << 40, "bytes copied (source and destination are this size each)",
              kind="size"),
        Param("setups", first_touch.SETUPS, help="which setups", kind="choices", choices=first_touch.SETUPS),
    )
    default_allocators = ("glibc",)
    default_reps = 6    # the fewest rounds whose medians and paired ratios have a 95% CI

    def variants(self, values, facts) -> list[Variant]:
        return [Variant({"setup": s}, first_touch.WORKLOAD, {"bytes": values["bytes"], "setup": s})
                for s in values["setups"]]

    def analyse(self, run: StoredRun) -> CaseResult:
        ev = [_evidence(c) for c in run.cells]
        rows = []
        for e in ev:
            if not e.supported:
                rows.append([e.setup, e.allocator, "not supported", *["-"] * 9, e.reason or ""])
                continue
            rss = (Seq((mib_of((e.rss_before_kb or 0) * 1024), mib_of((e.rss_after_kb or 0) * 1024)), " → ")
                   if e.rss_before_kb is not None else Num(None))
            rows.append([e.setup, e.allocator, Num(e.copy_gbs, "GB/s", ".2f"), Num(e.copy_faults),
                         Num(e.again_gbs, "GB/s", ".2f"), Num(e.again_faults), ms_of(e.source_ns),
                         ms_of(e.setup_ns), Num(e.setup_faults),
                         rss, Num(e.zero_page_faults), ("ZERO-PAGE " if e.zero_page else "") + e.status])
        n = ev[0].n_bytes if ev else 0
        table = CaseTable(
            f"Copy of {fmt_mib(n)} (median over runs; the statements give the 95% CIs)",
            ["setup", "allocator", "copy", "faults in copy", "copy again", "faults in copy again", "source written",
             "destination setup", "faults in setup", "RSS before → after copy", "faults adding no RSS", "status"],
            rows,
            notes=[f"{n // PAGE_BYTES:,} pages of {PAGE_BYTES} B per buffer. 'source written': malloc and memset of "
                   "the source (none in fresh); 'destination setup': the setup's own cost. GB/s = bytes copied / wall time "
                   "(10^9 B/s). 'faults adding no RSS' = faults in the copy minus the pages RSS grew by: mappings of "
                   "the shared zero page."])
        fig = CaseFigure(f"Timed copy of {fmt_mib(n)}, per setup", "GB/s",
                         result_rows((e.name, per_run(e.cell, _gbs(e, "copy"))) for e in ev if e.supported))
        return CaseResult(self.question, [table], self._statements(ev, run), [fig] if fig.rows else [])

    def _statements(self, ev: list[SetupEvidence], run: StoredRun) -> list[str]:
        out = []
        ref = Readings({e.allocator: e for e in ev if e.setup == "prefaulted" and e.copy_gbs})
        for e in ev:
            if not e.supported:
                out.append(f"{e.name}: not supported by this kernel ({e.reason}); nothing was measured.")
                continue
            if e.copy_gbs is None:
                out.append(f"{e.name}: no successful run ({e.status}).")
                continue
            faults, pages = e.copy_faults or 0, e.pages
            text = (f"{e.name}: the timed copy ran at {median_text(per_run(e.cell, _gbs(e, 'copy')), _show_gbs)} "
                    f"and took {faults:,.0f} page faults ({faults / pages:.2f} per page copied)")
            r = ref[e.allocator]
            if r is not None and r is not e and faults >= FAULTED_SHARE * pages and \
                    (r.copy_faults or 0) < CLEAN_SHARE * pages:
                slower = paired(r.cell, e.cell, _gbs(e, "copy"))
                text += (f"; {ratio_text(slower)} slower than the copy into prefaulted memory (paired by round; "
                         f"{r.copy_gbs:.2f} GB/s, {r.copy_faults or 0:,.0f} faults)")
            if e.setup == "hugepage":
                if 0 < faults <= pages / HUGE_PAGES_PER_FAULT:
                    text += (f"; {pages / faults:,.0f} pages of 4 KiB per fault: the kernel mapped the destination "
                             f"with 2 MiB pages")
                elif faults > pages / HUGE_PAGES_PER_FAULT:
                    text += (f"; that is about one fault per {pages / faults:,.1f} base pages, so huge pages were "
                             f"not given for most of the range (THP setting: {run.machine.thp})")
            if (e.setup_faults or 0) >= FAULTED_SHARE * pages and (faults < CLEAN_SHARE * pages):
                text += (f"; the destination's setup paid for them instead: {fmt_ms(e.setup_ns)} and "
                         f"{e.setup_faults:,.0f} faults outside the timed region")
            out.append(text + ".")
            if e.zero_page:
                out.append(self._zero_page(e, r))
        return out

    @staticmethod
    def _zero_page(e: SetupEvidence, r: SetupEvidence | None) -> str:
        grown = ((e.rss_after_kb or 0) - (e.rss_before_kb or 0)) * 1024
        text = (f"ZERO-PAGE: in {e.name}, {e.zero_page_faults:,.0f} of the copy's {e.copy_faults:,.0f} faults added no "
                f"resident memory (RSS grew {fmt_mib(grown)} for {fmt_mib(2 * e.n_bytes)} of source and destination): "
                f"the source was never written, so its pages map the shared zero page")
        if r is not None and e.again_gbs and r.again_gbs:
            faster = paired(e.cell, r.cell, _gbs(e, "copy-again"))
            quoted = (f"; the second copy from it ran at {median_text(per_run(e.cell, _gbs(e, 'copy-again')), _show_gbs)}"
                      f" against {median_text(per_run(r.cell, _gbs(r, 'copy-again')), _show_gbs)} from a written source "
                      f"({ratio_text(faster)}, paired by round)")
            if resolved_above(faster, 1 + CASE_NOISE):
                text += quoted + ": a benchmark that copies from it reports a bandwidth its memory does not have"
            else:
                text += quoted + f": no speed-up beyond {CASE_NOISE:.0%} was resolved here"
        return text + "."


CASE = FirstTouch()
