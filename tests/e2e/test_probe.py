"""The probe inside real programs: regions, faults, syscall tracepoints, standalone summary."""
from __future__ import annotations

import subprocess

from conftest import fixture, ms_run, needs_tracepoints, regions_of


def test_regions_carry_their_own_faults():
    pages = 2048
    doc = ms_run("--", fixture("fx-regions"), str(pages))
    regions = {r["name"]: r for r in regions_of(doc)}
    touch, quiet = regions["touch"], regions["quiet"]
    assert touch["ops"] == pages
    # Each first touch of a 4 KiB page (THP off for this mapping) is one minor fault.
    assert pages <= touch["counters"]["page-faults-minor"] <= pages * 1.1
    assert quiet["counters"]["page-faults-minor"] < pages / 10
    assert touch["wall_ns"] > 0 and touch["user_ns"] + touch["sys_ns"] > 0


def test_nested_regions_end_inner_first():
    doc = ms_run("--", fixture("fx-regions"), "8")
    names = [(r["name"], r["depth"]) for r in regions_of(doc)]
    assert names.index(("inner", 1)) < names.index(("outer", 0))


@needs_tracepoints
def test_tracepoints_count_a_known_number_of_madvise_calls():
    n = 1000
    doc = ms_run("--", fixture("fx-madvise_n"), str(n))
    region = next(r for r in regions_of(doc) if r["name"] == "madvise")
    assert region["syscalls"]["madvise"] == n
    # From outside, the whole process: the same calls plus whatever start-up did (none, usually).
    assert n <= doc["syscalls"]["madvise"] <= n + 5


def test_probe_alone_prints_a_summary_to_stderr():
    out = subprocess.run([fixture("fx-regions"), "64"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    assert 'region "touch"' in out.stderr and "64 ops" in out.stderr
    assert "page-faults-minor=" in out.stderr
