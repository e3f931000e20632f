"""The gate's checks on synthetic runs and on the stored run: time verdicts from paired rounds,
count verdicts beyond the runs' spread, the exit verdict, and the CI outputs (JUnit, Markdown,
JSON). No process runs here; tests/e2e/test_gate_e2e.py runs the gate on real programs."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from memsleuth.analysis import gate, regression
from memsleuth import stats
from memsleuth.records.evidence import Sample
from memsleuth.report import junit, markdown
from memsleuth.records.store import Store

MS = 1_000_000
DATA = Path(__file__).resolve().parents[1] / "data" / "compare-random-mixed.db"


def run_doc(cpu_ms: float = 100.0, wall_ms: float | None = None, minflt: int = 1000, madvise: int = 0,
            maxrss_kb: int = 50_000, syscall_args: dict | None = None) -> Sample:
    doc = {"status": "ok", "wall_ns": int((wall_ms or cpu_ms) * MS), "user_ns": int(cpu_ms * 0.9 * MS),
           "sys_ns": int(cpu_ms * 0.1 * MS), "minflt": minflt, "maxrss_kb": maxrss_kb, "counters": {},
           "syscalls": {"mmap": 20, "munmap": 5, "madvise": madvise, "brk": 3, "futex": 0}, "unsupported": {},
           "probe": [], "syscall_args": syscall_args or {}}
    return Sample.from_msrun(doc)


def est(median, low, high, n=10):
    return stats.Estimate(median, low, high, 0.95, n)


@pytest.mark.parametrize("change,kind", [
    (est(1.10, 1.07, 1.14), gate.REGRESSION),      # the whole CI above +5%
    (est(1.02, 0.99, 1.04), gate.PASS),            # the whole CI below +5%: no slowdown that large
    (est(0.90, 0.86, 0.95), gate.IMPROVEMENT),     # the whole CI below 0
    (est(1.05, 1.01, 1.09), gate.UNRESOLVED),      # straddles +5%
    (est(1.20, None, None, 4), gate.UNRESOLVED),   # too few rounds for a CI, however large the change
    (None, gate.UNRESOLVED),
])
def test_time_verdict_is_three_way_against_the_threshold(change, kind):
    verdict, text = gate.time_verdict(change, 0.05)
    assert verdict == kind
    if kind == gate.UNRESOLVED:
        assert "unresolved" in text or "no round" in text     # never worded as "no difference"


def test_unresolved_time_says_how_wide_the_ci_was():
    _, text = gate.time_verdict(est(1.04, 0.90, 1.26), 0.05)
    assert "±18.0%" in text and "+5%" in text


def test_paired_time_pairs_by_round_and_reads_cpu_or_wall():
    base = {r: run_doc(cpu_ms=100 + r, wall_ms=300) for r in range(8)}
    cand = {r: run_doc(cpu_ms=(100 + r) * 1.2, wall_ms=300) for r in range(8)}
    cpu = gate.paired_time(base, cand, "cpu")
    assert cpu.median == pytest.approx(1.2) and cpu.low == pytest.approx(1.2)   # pairing cancels the round drift
    assert gate.paired_time(base, cand, "wall").median == pytest.approx(1.0)
    assert gate.resolved(base, cand, "cpu", 0.05) and gate.time_check("c", base, cand, "cpu", 0.05).verdict == \
        gate.REGRESSION


def _metric(name):
    return next(m for m in gate.COUNTS if m.name == name)


def test_a_deterministic_count_change_is_a_regression_and_its_mirror_an_improvement():
    m = _metric("madvise calls")
    up = gate.count_check("c", m, [1000.0] * 5, [1500.0] * 5, 0.10)
    assert up.verdict == gate.REGRESSION and "+50%" in up.text
    down = gate.count_check("c", m, [1500.0] * 5, [1000.0] * 5, 0.10)
    assert down.verdict == gate.IMPROVEMENT


def test_a_count_change_inside_the_runs_spread_is_not_called():
    m = _metric("page faults")
    c = gate.count_check("c", m, [10_000.0, 14_000, 10_500, 13_000, 11_000],
                         [12_000.0, 15_000, 13_500, 14_200, 10_900], 0.10)
    assert c.verdict == gate.UNRESOLVED and "overlap" in c.text


@pytest.mark.parametrize("a,b,why", [
    ([10.0] * 5, [60.0] * 5, "never called"),        # +500%, but 50 calls: under the floor
    ([10_000.0] * 5, [10_500.0] * 5, "within"),       # +5%: under the 10% threshold
])
def test_small_count_changes_pass(a, b, why):
    c = gate.count_check("c", _metric("mmap calls"), a, b, 0.10)
    assert c.verdict == gate.PASS and why in c.text


def test_too_few_runs_never_call_a_count():
    c = gate.count_check("c", _metric("madvise calls"), [1000.0] * 3, [2000.0] * 3, 0.10)
    assert c.verdict == gate.UNRESOLVED and "fewer than 5" in c.text


def test_counts_that_never_happened_are_left_out_and_futex_never_gates():
    base = [run_doc(madvise=0) for _ in range(5)]
    checks = {c.metric: c for c in gate.count_checks("c", base, base, 0.10)}
    assert "madvise calls" not in checks and "page faults" in checks
    futex = _metric("futex calls")
    c = gate.count_check("c", futex, [1000.0] * 5, [5000.0] * 5, 0.10)
    assert c.verdict == gate.REGRESSION and not c.gates
    assert gate.outcome([c]) == gate.PASS


def test_released_bytes_are_read_from_the_recorded_arguments():
    args = {"munmap": {"calls": 2, "bytes": 3 << 20}, "brk": {"down_bytes": 1 << 20},
            "madvise": {"by_advice": {"4": [10, 2 << 20], "14": [5, 9 << 20]}}}   # DONTNEED purges; 14 (HUGEPAGE) not
    assert gate.COUNTS[-1].read(run_doc(syscall_args=args)) == 6 << 20
    assert gate.COUNTS[-1].read(run_doc()) is None


def test_outcome_is_the_worst_gating_verdict():
    def check(v, gates=True):
        return gate.Check("c", "m", "count", v, 1, 1, None, 0.1, "t", gates=gates)
    assert gate.outcome([check(gate.PASS), check(gate.IMPROVEMENT)]) == gate.PASS
    assert gate.outcome([check(gate.PASS), check(gate.UNRESOLVED)]) == gate.UNRESOLVED
    assert gate.outcome([check(gate.UNRESOLVED), check(gate.REGRESSION)]) == gate.REGRESSION
    assert gate.outcome([check(gate.REGRESSION, gates=False)]) == gate.PASS


def test_junit_marks_regressions_failed_and_unresolved_skipped_and_escapes_names():
    hostile = 'a<b>&"c"\x1b[31m'
    checks = [gate.Check(hostile, "time (cpu)", "time", gate.REGRESSION, 1, 1.2, None, 0.05, "+20% <worse>"),
              gate.Check(hostile, "page faults", "count", gate.UNRESOLVED, 1, 1, None, 0.1, "overlap"),
              gate.Check(hostile, "mmap calls", "count", gate.PASS, 1, 1, None, 0.1, "same")]
    root = ET.fromstring(junit.render(checks, suite="s"))
    suite = root.find("testsuite")
    assert suite.get("tests") == "3" and suite.get("failures") == "1" and suite.get("skipped") == "1"
    cases = suite.findall("testcase")
    assert cases[0].find("failure").get("message") == "+20% <worse>"
    assert cases[1].find("skipped") is not None and cases[2].find("failure") is None
    assert "\x1b" not in cases[0].get("classname") and "<b>" in cases[0].get("classname")


def test_diff_counts_on_the_stored_run_and_its_unresolved_time_says_why():
    store = Store(str(DATA), readonly=True)
    run = store.load_run(store.latest_run_id())
    changes = regression.compare_runs(run, run, 0.05)
    assert changes and not any(ch.regression for ch in changes)
    for ch in changes:
        assert ch.counts and all(c.verdict == gate.PASS for c in ch.counts if c.gates)
        assert ch.verdict.text.startswith(("no change beyond", "unresolved"))
    checks = regression.junit_checks(changes, 0.05)
    assert len(checks) == sum(1 + len(ch.counts) for ch in changes)


def test_diff_time_verdict_tells_inside_from_straddling():
    assert regression.time_verdict(est(1.01, 0.99, 1.03), 0.05).text.startswith("no change beyond ±5%")
    assert regression.time_verdict(est(1.04, 0.90, 1.20), 0.05).text.startswith("unresolved")
    assert regression.time_verdict(est(1.10, 1.07, 1.14), 0.05).kind == "slower"


def test_gate_report_and_json_from_a_stored_pair(tmp_path):
    from memsleuth.report.builders import gate as gate_report
    store = Store(str(DATA), readonly=True)
    run = store.load_run(store.latest_run_id())
    pair = type(run)(**{**run.__dict__, "cells": run.cells[:2]})
    result = gate.evaluate(pair, "cpu", 0.05, 0.10)
    assert result.rounds >= 6 and result.checks[0].kind == "time"
    report = gate_report.build(pair, result, ["memsleuth", "gate"])
    assert report.answer and report.footer[0].startswith("Gate:")
    doc = gate_report.to_dict(pair, result)
    assert doc["schema"] == "memsleuth.gate/1" and doc["verdict"] == result.verdict
    assert [c["metric"] for c in doc["checks"]] == [c.metric for c in result.checks]
    md = markdown.render(report)
    assert "| check | baseline | candidate |" in md
