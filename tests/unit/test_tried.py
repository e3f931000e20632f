"""Advice, tried: which candidates a finding names (analysis/tries.py) and how a trial is judged
(tried.py), on synthetic checks. tests/e2e/test_try_e2e.py runs `check --try` on real programs."""
from __future__ import annotations

import pytest

from memsleuth.analysis import gate, tried, tries
from memsleuth import stats
from memsleuth.analysis.findings.base import Finding
from memsleuth.analysis.tries import Try, for_findings
from memsleuth.report import wording

INSTALLED = ["glibc", "mimalloc", "jemalloc"]


def finding(id_: str, who: str = "allocator") -> Finding:
    return Finding(id_, "t", "m", [], "a", "high", who=who)


def test_a_finding_names_its_tunables_and_the_other_installed_allocators():
    names = [t.name for t in for_findings([finding("heap-trim-churn")], "glibc", INSTALLED)]
    assert names == ["trim_threshold=1G", "top_pad=64M", "mimalloc", "jemalloc"]   # no tcmalloc: not installed
    assert [t.name for t in for_findings([finding("madvise-storm")], "mimalloc", INSTALLED)] == \
        ["mimalloc: purge later", "jemalloc", "glibc"]


def test_an_allocator_compiled_into_the_program_is_tried_with_its_own_settings_only():
    """A Rust program on the mimalloc crate, its madvise calls mimalloc's in its own binary: glibc's
    tunables and preloaded allocators do not reach them (the program calls mimalloc directly), its own
    purge delay does."""
    built = Finding("madvise-storm", "t", "m", [], "a", "high", who="allocator",
                    numbers={"built_in_allocator": "mimalloc"})
    (t,) = for_findings([built], "glibc", INSTALLED)
    assert t.name == "mimalloc (built in): purge later" and t.env["MIMALLOC_PURGE_DELAY"] and not t.allocator
    jem = Finding("mmap-churn", "t", "m", [], "a", "high", who="allocator", numbers={"built_in_allocator": "jemalloc"})
    (t,) = for_findings([jem], "glibc", INSTALLED)
    assert t.env["_RJEM_MALLOC_CONF"] == t.env["MALLOC_CONF"]
    overhead = Finding("heap-overhead", "t", "m", [], "a", "high", who="allocator",
                       numbers={"built_in_allocator": "mimalloc", "arenas": 3})
    assert for_findings([overhead], "glibc", INSTALLED) == []       # nothing of its own to try there


def test_calls_the_program_makes_itself_get_no_candidate():
    assert for_findings([finding("madvise-storm", who="program")], "glibc", INSTALLED) == []
    assert for_findings([finding("zero-page-read")], "glibc", INSTALLED) == []


def test_one_change_for_two_findings_is_tried_once_with_both_evidences():
    both = for_findings([finding("heap-trim-churn"), finding("madvise-storm")], "glibc", INSTALLED)
    trim = next(t for t in both if t.name == "trim_threshold=1G")
    assert trim.finding == "heap-trim-churn, madvise-storm"
    assert trim.evidence == ("brk calls", "page faults", "madvise calls")
    assert Try.from_dict(trim.to_dict()) == trim
    assert len([t for t in both if t.name == "mimalloc"]) == 1


def time_check(median, low, high):
    e = stats.Estimate(median, low, high, 0.95, 10)
    v, text = gate.time_verdict(e, 0.05)
    return gate.Check("c", "time (cpu)", "time", v, 1.0, median, e, 0.05, text, unit="s")


def count(metric, a, b, unit="calls"):
    m = next(m for m in gate.COUNTS if m.name == metric)
    return gate.count_check("c", m, [a] * 6, [b] * 6, 0.10)


@pytest.mark.parametrize("time,rss,evidence,kind", [
    (time_check(0.80, 0.75, 0.85), count("peak RSS", 10e6, 10e6), [count("brk calls", 1000, 2)], tried.HELPS),
    (time_check(0.80, 0.75, 0.85), count("peak RSS", 10e6, 30e6), [], tried.TRADE_OFF),
    (time_check(1.20, 1.10, 1.30), None, [count("madvise calls", 1000, 1000)], tried.WORSE),
    (time_check(1.00, 0.98, 1.02), None, [count("madvise calls", 112_000, 112_000)], tried.NO_EFFECT),
    (time_check(0.97, 0.90, 1.03), None, [count("madvise calls", 1000, 1000)], tried.UNRESOLVED),
])
def test_a_trial_is_judged_on_the_findings_cost(time, rss, evidence, kind):
    assert tried.verdict(time, rss, evidence).verdict == kind


def test_a_count_that_fell_while_the_time_did_not_is_not_a_fix():
    # trim_threshold stops the break's moves; the same pages are then mapped and faulted by mmap.
    evidence = [count("brk calls", 1000, 3), count("page faults", 8e5, 8e5)]
    j = tried.verdict(time_check(1.00, 0.98, 1.02), None, evidence)
    why = wording.trial_why(tried.Trial(None, j.cost, None, evidence, j))
    assert j.verdict == tried.NO_EFFECT and "no change beyond ±5%" in why


def test_a_memory_finding_is_judged_on_peak_rss():
    rss = count("peak RSS", 100e6, 40e6, "bytes")
    assert tried.verdict(time_check(1.0, 0.98, 1.02), rss, [rss], primary="peak RSS").verdict == tried.HELPS


def test_the_candidates_that_fit_the_budget_and_the_rounds_it_holds():
    cands = ["a", "b", "c"]
    # 1 s runs (+0.3 s each), 4 cells: 5.2 s a round; 120 s hold 22 rounds with the warm-up: capped at 20
    assert tries.fit(cands, 1.0, 120.0, 20) == (cands, [], 20)
    # 40 s: 4 cells give 6 rounds? 40 // 5.2 - 1 = 6: all three kept, 6 rounds
    assert tries.fit(cands, 1.0, 40.0, 20) == (cands, [], 6)
    # 30 s: three do not fit 6 rounds (4 cells), two do not (3.9 s a round: 6), ... the last ones left out
    kept, left, rounds = tries.fit(cands, 1.0, 30.0, 20)
    assert kept == ["a", "b"] and left == ["c"] and rounds >= tries.MIN_ROUNDS
    assert tries.fit(cands, 10.0, 30.0, 20) == ([], cands, 0)
    assert tries.default_budget(0.5) == tries.BUDGET_MIN_S and tries.default_budget(10.0) == 200.0


def test_a_change_for_a_time_finding_and_a_memory_one_is_judged_on_both_costs():
    """Another allocator for glibc's thread arenas (tcmalloc tried here on plain-arenas 2 32 0: it addresses the memory
    they keep (peak RSS) and their mprotect calls (time)). Time -42%, peak RSS the same: it helps,
    where judged on peak RSS alone it was 'no effect'."""
    from memsleuth.analysis.tries import BOTH
    both = for_findings([finding("heap-retained"), finding("mprotect-calls", who="allocator")], "glibc", INSTALLED)
    tc = next(t for t in both if t.name == "mimalloc")
    assert tc.primary == BOTH and Try.from_dict(tc.to_dict()) == tc
    same = count("peak RSS", 71e6, 70e6, "bytes")
    j = tried.verdict(time_check(0.58, 0.50, 0.63), same, [], primary=BOTH)
    assert j.verdict == tried.HELPS and j.cost.metric == "time (cpu)"
    assert tried.verdict(time_check(1.0, 0.98, 1.02), same, [], primary=BOTH).verdict == tried.NO_EFFECT
    assert tried.verdict(time_check(0.97, 0.90, 1.03), same, [], primary=BOTH).verdict == tried.UNRESOLVED
