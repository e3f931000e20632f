"""The case studies: each seed field report reproduced and explained in one command (docs/cases.md)."""
from __future__ import annotations

from dataclasses import dataclass

from memsleuth.cases.alloc_churn import CASE as ALLOC_CHURN
from memsleuth.cases.first_touch import CASE as FIRST_TOUCH
from memsleuth.cases.thread_heap import CASE as THREAD_HEAP
from memsleuth.cases.cache_flush import CASE as CACHE_FLUSH
from memsleuth.cases.allocator_shootout import CASE as ALLOCATOR_SHOOTOUT
from memsleuth.cases.base import Case, CaseResult, CaseTable, Variant, case_plan
from memsleuth.errors import UsageError
from memsleuth.analysis.summary import RunAnalysis, analyse_run
from memsleuth.records.stored import StoredRun

CASES: dict[str, Case] = {c.name: c for c in (ALLOC_CHURN, FIRST_TOUCH, THREAD_HEAP, CACHE_FLUSH, ALLOCATOR_SHOOTOUT)}


@dataclass
class CaseAnalysis:
    """A case run analysed once: the case's own result, and the compare analysis of the same cells
    (their summaries and failures, which the report and the JSON export show too)."""
    case: Case
    result: CaseResult
    run: RunAnalysis


def analyse(run: StoredRun) -> CaseAnalysis:
    case = get(run.name)
    return CaseAnalysis(case, case.analyse(run), analyse_run(run))


def get(name: str) -> Case:
    try:
        return CASES[name]
    except KeyError:
        raise UsageError(f"unknown case {name!r}: the cases are {', '.join(CASES)} (see `memsleuth case --list`)") from None


__all__ = ["CASES", "Case", "CaseAnalysis", "CaseResult", "CaseTable", "Variant", "analyse", "case_plan", "get"]
