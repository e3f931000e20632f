"""Each findings rule on small synthetic evidence: no root, no build, no process. The documents
have the shape ms-run writes (docs/json-schema.md); each rule is shown its mechanism just past its
threshold and a clean case just short of it. The end-to-end tests (test_findings.py) check the
same rules on real processes."""
from __future__ import annotations

from memsleuth.analysis import findings
from memsleuth.records.evidence import Sample
from memsleuth.analysis.findings import (
    counters_unavailable,
    first_touch,
    heap_trim,
    kernel_gap,
    lock_contention,
    madvise_storm,
    mmap_churn,
    rss_blowup,
    unstable,
    zero_page,
)
from memsleuth.analysis.view import CellView
from memsleuth.units import PAGE_BYTES

MS = 1_000_000


def region(name="main", ops=1_000_000, wall_ns=100 * MS, user_ns=90 * MS, sys_ns=10 * MS, minflt=0,
           syscalls=None, brk=0, rss=(1000, 1000), depth=0, **counters) -> dict:
    return {"type": "region", "name": name, "depth": depth, "ops": ops, "wall_ns": wall_ns, "user_ns": user_ns,
            "sys_ns": sys_ns, "brk_delta_bytes": brk, "rss_start_kb": rss[0], "rss_end_kb": rss[1],
            "counters": {"page-faults-minor": minflt, "page-faults-major": 0, **counters},
            "syscalls": {"mmap": 0, "munmap": 0, "madvise": 0, "brk": 0, "futex": 0, **(syscalls or {})}}


def sample(*regions: dict, result=None, maxrss_kb=10_000, unsupported=None, **process) -> Sample:
    doc = {"status": "ok", "wall_ns": 200 * MS, "user_ns": 150 * MS, "sys_ns": 20 * MS, "minflt": 100,
           "maxrss_kb": maxrss_kb, "counters": {}, "syscalls": {}, "unsupported": unsupported or {},
           "probe": list(regions), **process}
    return Sample.from_msrun(doc, result)


def view(*samples: Sample, allocator="glibc", **kw) -> CellView:
    return CellView("cell", allocator, list(samples), **kw)


def ids(found) -> list[str]:
    return [f.id for f in found]


def test_every_rule_returns_a_list():
    v = view(sample(region()))
    for rule in findings.CELL_RULES:
        assert rule.check(v) == [], rule.__name__
    assert kernel_gap.check_pair(v, v) == []
    assert counters_unavailable.check_run([v]) == []


def test_madvise_in_a_region_without_arguments_names_the_calls_not_a_purge():
    # 600 calls, no page faults: the calls' unit cost (0.36 ms) leaves 40 ms unexplained, which
    # goes to the sized calls as an upper bound; the advice was not recorded, so no "purging".
    storm = region(syscalls={"madvise": 600}, user_ns=60 * MS, sys_ns=40 * MS, minflt=300)
    found = madvise_storm.check(view(sample(storm), allocator="jemalloc"))
    assert ids(found) == ["madvise-calls"] and "up to" in found[0].title
    assert "purg" not in found[0].mechanism and "not recorded" in " ".join(found[0].evidence)
    assert found[0].confidence in ("low", "medium")     # an upper bound, not confirmed by arguments
    cheap = region(syscalls={"madvise": 600}, user_ns=99 * MS, sys_ns=1 * MS)  # 1% of the CPU time
    assert madvise_storm.check(view(sample(cheap))) == []


def _steps(n, free_brk, init_faults):
    out = []
    for _ in range(n):
        # A step that faults 8 MiB takes a few ms, most of it the faults (seed 000: 80 MiB in ~50 ms).
        out += [region("alloc", ops=0), region("init", ops=0, minflt=init_faults, wall_ns=4 * MS),
                region("free", ops=0, brk=free_brk, syscalls={"brk": 1})]
    return out


def test_heap_trim_in_steps():
    mib8 = 8 << 20
    found = heap_trim.check(view(sample(*_steps(6, -mib8, mib8 // PAGE_BYTES))))
    assert ids(found) == ["heap-trim-churn"]
    assert any("'init'" in e and "page faults per step" in e for e in found[0].evidence)
    # The break moves down, but the next steps do not fault it back: no churn.
    assert heap_trim.check(view(sample(*_steps(6, -mib8, 10)))) == []
    # Small trims (glibc's housekeeping) are not churn.
    assert heap_trim.check(view(sample(*_steps(6, -(64 << 10), 16)))) == []


def test_heap_trim_from_rate_in_main():
    churn = region(syscalls={"brk": 400}, minflt=50_000, brk=1 << 20)
    assert ids(heap_trim.check(view(sample(churn)))) == ["heap-trim-churn"]
    growth = region(syscalls={"brk": 40}, minflt=50_000, brk=8 << 20)  # a heap that only grows
    assert heap_trim.check(view(sample(growth))) == []


def test_mmap_churn():
    churn = region(syscalls={"mmap": 3000, "munmap": 3000}, minflt=3000 * 64)
    assert ids(mmap_churn.check(view(sample(churn)))) == ["mmap-churn"]
    few_faults = region(syscalls={"mmap": 3000, "munmap": 3000}, minflt=3000 * 4)
    assert mmap_churn.check(view(sample(few_faults))) == []


def test_first_touch_and_zero_page():
    pages = 65_536
    cold = region("copy", minflt=pages, user_ns=20 * MS, sys_ns=80 * MS, rss=(1000, 1000 + pages * PAGE_BYTES // 1024))
    assert ids(first_touch.check(view(sample(cold)))) == ["first-touch"]
    assert zero_page.check(view(sample(cold))) == []
    zero = region("scan", minflt=pages, user_ns=20 * MS, sys_ns=80 * MS, rss=(1000, 1010))
    assert ids(zero_page.check(view(sample(zero)))) == ["zero-page-read"]
    assert first_touch.check(view(sample(zero))) == []
    warm = region("copy", minflt=10, rss=(1000, 1000))
    assert first_touch.check(view(sample(warm))) == [] and zero_page.check(view(sample(warm))) == []


def test_lock_contention():
    assert ids(lock_contention.check(view(sample(region(syscalls={"futex": 600}))))) == ["lock-contention"]
    assert lock_contention.check(view(sample(region(syscalls={"futex": 400})))) == []


def test_rss_blowup():
    live = 10 << 20
    big = sample(region(), result={"peak_live_bytes": live}, maxrss_kb=(live * 8) // 1024)
    assert ids(rss_blowup.check(view(big))) == ["rss-blowup"]
    fine = sample(region(), result={"peak_live_bytes": live}, maxrss_kb=(live * 2) // 1024)
    assert rss_blowup.check(view(fine)) == []


def test_unstable_speaks_once_per_run():
    cells = [CellView(f"cell{i}", "glibc", [sample(region())], ci_half_width=hw) for i, hw in
             enumerate((0.08, 0.30, 0.03, 0.12))]
    found = unstable.check_run(cells)
    assert ids(found) == ["unstable-measurement"] and "3 of 4" in found[0].title
    assert "cell1 ±30.0%" in found[0].evidence[0] and "cell2" not in found[0].evidence[0]
    assert unstable.check_run(cells[2:3]) == []


def test_kernel_gap_pair():
    slow = view(sample(region(user_ns=100 * MS, sys_ns=200 * MS, syscalls={"madvise": 50_000})), allocator="slow")
    fast = view(sample(region(user_ns=100 * MS, sys_ns=5 * MS)), allocator="fast")
    found = kernel_gap.check_pair(slow, fast)
    assert ids(found) == ["kernel-gap"] and any("madvise" in e for e in found[0].evidence)
    same = view(sample(region(user_ns=100 * MS, sys_ns=5 * MS)), allocator="same")
    assert kernel_gap.check_pair(same, fast) == []


def test_counters_unavailable_run_rule():
    no_pmu = {"cycles": "No such file or directory: no PMU for this event (VM or container)"}
    found = counters_unavailable.check_run([view(sample(region(), unsupported=no_pmu))])
    assert ids(found) == ["counters-unavailable"] and "hardware" in found[0].numbers["missing"]
    # the advice says what makes the refused kinds open, and nothing of the kinds that did
    assert "PMU" in found[0].advice and "tracepoints" not in found[0].advice
    no_root = {"madvise": "Permission denied: syscall tracepoints need root"}
    found = counters_unavailable.check_run([view(sample(region(), unsupported={**no_pmu, **no_root}))])
    assert found[0].numbers["missing"] == ["hardware", "syscalls"]
    assert "PMU" in found[0].advice and "tracepoints need root" in found[0].advice
