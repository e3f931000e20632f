"""The case studies: each seed field report reproduced and explained in one command (docs/cases.md)."""
from __future__ import annotations

from memsleuth.cases.alloc_churn import CASE as ALLOC_CHURN
from memsleuth.cases.first_touch import CASE as FIRST_TOUCH
from memsleuth.cases.thread_heap import CASE as THREAD_HEAP
from memsleuth.cases.cache_flush import CASE as CACHE_FLUSH
from memsleuth.cases.allocator_shootout import CASE as ALLOCATOR_SHOOTOUT
from memsleuth.cases.base import Case, CaseResult, CaseTable, Variant, case_plan
from memsleuth.errors import UsageError

CASES: dict[str, Case] = {c.name: c for c in (ALLOC_CHURN, FIRST_TOUCH, THREAD_HEAP, CACHE_FLUSH, ALLOCATOR_SHOOTOUT)}


def get(name: str) -> Case:
    try:
        return CASES[name]
    except KeyError:
        raise UsageError(f"unknown case {name!r}: the cases are {', '.join(CASES)} (see `memsleuth case --list`)") from None


__all__ = ["CASES", "Case", "CaseResult", "CaseTable", "Variant", "case_plan", "get"]
