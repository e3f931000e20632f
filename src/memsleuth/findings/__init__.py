"""Findings: rules that read measured evidence and name the mechanism it proves.

One rule per module. A rule gets a `CellView` (the evidence of one cell: its successful runs,
medians of region `main` or of the whole process, repeated step regions) or a pair of them, and
returns a `Finding` or None. Rules fire on numbers only, never on the name of a workload or an
allocator; an allocator's name may only choose which option to suggest. Every finding quotes
the numbers it rests on. Thresholds live in each module, with the reason for their value, and
in docs/findings.md.
"""
from __future__ import annotations

from memsleuth.findings.base import Finding
from memsleuth.findings.view import CellView
from memsleuth.findings import (counters_unavailable, first_touch, heap_trim, kernel_gap, lock_contention,
                                madvise_storm, mmap_churn, rss_blowup, unstable, zero_page)

CELL_RULES = (madvise_storm, heap_trim, mmap_churn, first_touch, zero_page, lock_contention, rss_blowup,
              unstable)
PAIR_RULES = (kernel_gap,)
RUN_RULES = (counters_unavailable,)


def for_cell(view: CellView) -> list[Finding]:
    out = []
    for rule in CELL_RULES:
        found = rule.check(view)
        if found is None:
            continue
        out.extend(found if isinstance(found, list) else [found])
    return out


def for_pair(slower: CellView, faster: CellView) -> list[Finding]:
    return [f for rule in PAIR_RULES if (f := rule.check_pair(slower, faster)) is not None]


def for_run(views: list[CellView]) -> list[Finding]:
    return [f for rule in RUN_RULES if (f := rule.check_run(views)) is not None]


__all__ = ["Finding", "CellView", "for_cell", "for_pair", "for_run"]
