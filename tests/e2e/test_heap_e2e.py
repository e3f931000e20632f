"""Heap accounting (libmsheap) and the memory findings on real programs: live bytes against a
program that counts its own, a leak named by the allocation that stays live (not the buffer that
is allocated more and freed), fragmentation, and per-thread arenas. Asserted: byte counts (which
load cannot change) with margins for the sampled estimates."""
from __future__ import annotations

import json
import os
import subprocess
import tempfile

from conftest import fixture, memsleuth

from memsleuth.records import heap


def _account(*cmd: str, preload: str | None = None) -> tuple[dict, str]:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "MEMSLEUTH_HEAP_OUT": tmp,
               "LD_PRELOAD": fixture("libmsheap.so") + (":" + preload if preload else "")}
        out = subprocess.run(list(cmd), capture_output=True, text=True, env=env, timeout=120)
        assert out.returncode == 0, out.stderr
        return heap.read(tmp), out.stdout


def test_live_bytes_match_what_the_program_counts_under_each_allocator():
    from memsleuth.measure import allocators
    for alloc in [a for a in allocators.available() if a.name in ("glibc", "mimalloc", "jemalloc", "tcmalloc")]:
        h, out = _account(fixture("fx-live"), "100000", "3", "2", preload=alloc.preload)
        truth = json.loads(out)
        # The program's own blocks, plus what libc and the loader keep (a few KiB).
        assert 0 <= h["live_bytes"] - truth["live_usable"] < 64 << 10, (alloc.name, h["live_bytes"], truth)
        assert h["allocs"] >= truth["allocs"] and h["frees"] >= truth["frees"]
        assert h["peak_live_bytes"] <= truth["peak_usable"] + (2 << 20)     # per-thread batching: within 2 MiB


def _check(tmp_path, *cmd: str, where: bool = False) -> tuple[dict, str]:
    js = tmp_path / "c.json"
    proc = memsleuth("check", *(() if where else ("--no-where",)), "--db", str(tmp_path / "c.db"), "--json", str(js),
                     "--", *cmd)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(js.read_text())
    found = [f for c in doc["cells"] for f in c["summary"]["findings"]] + doc["findings"]
    return {f["id"]: f for f in found}, proc.stdout


def test_a_leak_is_named_by_the_allocation_that_stays_live(tmp_path):
    found, out = _check(tmp_path, fixture("plain-leak_request"), "30000")
    leak = found["heap-leak"]
    # 30,000 x 1 KiB never freed; each request's 64 KiB buffer is allocated far more and freed.
    assert leak["numbers"]["sites"][0].startswith("main (leak_request.c:14)"), leak["numbers"]["sites"]
    assert not any("leak_request.c:12" in s for s in leak["numbers"]["sites"])
    assert 28 << 20 <= leak["numbers"]["live_exit_bytes"] <= 34 << 20
    assert "Memory: what the resident memory is made of" in out


def test_fragmentation_shows_as_resident_memory_beyond_the_live_heap(tmp_path):
    found, _ = _check(tmp_path, fixture("plain-fragment"))
    f = found["heap-overhead"]
    assert f["numbers"]["when"] == "at exit" and f["numbers"]["unexplained_bytes"] >= 30 << 20
    assert 70 << 20 <= f["numbers"]["live_bytes"] <= 80 << 20     # the program prints it: about 74 MiB


def test_per_thread_arenas_keep_what_their_threads_freed_and_grow_a_page_per_mprotect(tmp_path):
    found, _ = _check(tmp_path, fixture("plain-arenas"), "4", "32", where=True)
    f = found["heap-retained"]
    assert f["numbers"]["arenas"] >= 2 and f["numbers"]["kept_bytes"] >= 64 << 20
    assert "arena_max" in f["advice"]
    # glibc grows each thread arena with an mprotect call per page (30% of the CPU time with 2 threads
    # here, 85% with 16 on 16 cores): the call sites put them in malloc, and the words are the arenas'
    m = found["mprotect-calls"]
    assert m["who"] == "allocator" and m["title"].startswith("glibc's thread arenas grow a page at a time"), m
    assert m["numbers"]["glibc_arenas"] >= 2 and "guard page" not in m["advice"]
    per_call = m["numbers"]["arena_bytes"] / m["numbers"]["mprotect"]
    assert 3 << 10 <= per_call <= 6 << 10, per_call       # about a 4 KiB page of arena for each call


def test_forked_workers_that_end_by_exit_are_accounted_with_their_arenas():
    """thread-heap's workers are forked and end with _exit (no atexit handler runs): each still
    writes its document. In threads mode each thread's arena is one arena, its heaps grouped."""
    from memsleuth.measure import native
    prog = str(native.native_path("thread-heap"))
    h, _ = _account(prog, "--mode=processes", "--threads=3", "--calls=200", "--elems=1000")
    assert h["processes"] == 4 and len(h["processes_detail"]) == 4      # the parent and three workers
    workers = [p for p in h["processes_detail"] if p["allocs"] >= 200 * 10]
    assert len(workers) == 3 and all(p["at_exit"]["arenas"] == 0 and p["at_exit"]["main_arena_kb"] > 0
                                     for p in workers)
    h, _ = _account(prog, "--mode=threads", "--threads=3", "--calls=200", "--elems=1000")
    at = h["at_exit"]
    assert h["processes"] == 1 and at["main_arena_kb"] > 0 and "libc.so" in h["malloc_object"]
    assert 1 <= at["arenas"] <= 3 and len(at["arena_kb"]) == at["arenas"] and sum(at["arena_kb"]) == at["arena_rss_kb"]


def test_compare_reads_the_fragmentation_workloads_heap_from_the_accounting(tmp_path):
    """The fragmentation workload counts nothing itself: compare's Heap table and the cell's JSON
    "heap" come from the explaining run's accounting, for every allocator."""
    js = tmp_path / "f.json"
    proc = memsleuth("compare", "--workload", "fragmentation", "--alloc", "glibc", "--reps", "1", "--param",
                     "phases=4", "--param", "count=5000", "--param", "live-max=1048576", "--no-reference",
                     "--db", str(tmp_path / "f.db"), "--json", str(js))
    assert proc.returncode == 0, proc.stderr
    (cell,) = json.loads(js.read_text())["cells"]
    f = cell["summary"]["heap"]
    # Phase 3 holds 5000 blocks of 192-320 bytes (1.2 MiB usable) with the survivors of phases 0-2.
    assert 1 << 20 <= f["live_at_peak_bytes"] <= 3 << 20, f
    # The anonymous memory is read against the live heap of that moment, which says whether it was
    # near the peak (a run this short can pass its peak between two readings).
    assert f["anon_read_near_peak"] == (f["live_at_peak_bytes"] <= 1.1 * f["anon_read_at_live_bytes"])
    assert f["anon_at_peak_bytes"] >= f["anon_read_at_live_bytes"] and f["live_at_exit_bytes"] < f["live_at_peak_bytes"]
    assert "Heap: live bytes against resident memory" in proc.stdout


def test_a_vfork_child_that_ends_by_exit_leaves_the_parents_account_alone():
    """The vfork child shares the parent's memory: were its _exit to write a document, the parent's
    would never be written (and the child's would be the parent's counts under another pid)."""
    h, out = _account(fixture("fx-vfork_exit"), "1000")
    truth = json.loads(out)
    assert [p["pid"] for p in h["processes_detail"]] == [truth["pid"]]
    assert h["allocs"] >= truth["allocs"] and h["frees"] >= 500


def test_the_accounting_leaves_glibcs_state_as_the_program_alone_would(tmp_path):
    """The explaining run's libraries must not change what they measure. Two ways they did: a 2 MiB
    probe block freed at start raised glibc's mmap threshold (blocks up to 2 MiB came from the heap,
    so mmap churn vanished from the explaining run), and the report's stdio buffer, a large block,
    made glibc merge every fast-bin chunk the program had left (a Perl child that freed its hash
    spent 4x as long in malloc_consolidate). The fixture prints how many of its 1 MiB blocks were
    mmapped, and a library preloaded after them prints the fast bins' bytes after the reports."""
    cmd = [fixture("fx-fastbins")]
    left = fixture("libfx-fastbins_left.so")
    alone = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "LD_PRELOAD": left}, timeout=60)
    env = {**os.environ, "MEMSLEUTH_HEAP_OUT": str(tmp_path), "MEMSLEUTH_SITES": "page-faults=1000",
           "MEMSLEUTH_SITES_OUT": str(tmp_path),
           "LD_PRELOAD": ":".join([fixture("libmsheap.so"), fixture("libmssites.so"), left])}
    accounted = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    assert alone.returncode == accounted.returncode == 0, accounted.stderr
    assert alone.stdout.splitlines() == ["mapped 8", "fastbin bytes " + alone.stdout.split()[-1]]
    assert int(alone.stdout.split()[-1]) > 100_000          # the program's own frees are still there
    assert accounted.stdout == alone.stdout
    assert {p.name for p in tmp_path.iterdir()} == {"heap.jsonl", "sites.jsonl"}   # both reports written


def test_a_leak_beside_transient_peaks_is_found_with_its_exact_bytes(tmp_path, monkeypatch):
    """40 requests keep 32 KiB each beside a 24 MiB buffer each frees: the peak is never mostly live
    at exit, so the leak shows only in the heap's low points; its bytes are the exact live bytes at
    exit (the samples only split them), here all at one site. One sample per 64 KiB allocated makes
    the site's sampling near certain (1.25 MiB left)."""
    monkeypatch.setenv("MEMSLEUTH_HEAP_SAMPLE", "65536")
    js = tmp_path / "c.json"
    proc = memsleuth("check", "--no-where", "--db", str(tmp_path / "c.db"), "--json", str(js), "--",
                     fixture("plain-leak_beside_peaks"))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(js.read_text())
    found = {f["id"]: f for c in doc["cells"] for f in c["summary"]["findings"]}
    leak = found["heap-leak"]
    assert leak["numbers"]["by"] == "floor", leak
    assert leak["numbers"]["sites"] and leak["numbers"]["sites"][0].startswith("main (leak_beside_peaks.c:17)")
    # 40 blocks of 32 KiB: glibc's usable size is 32,776 bytes each; what libc keeps beside is a few KiB.
    assert 40 * 32_776 <= leak["numbers"]["live_exit_bytes"] < 40 * 32_776 + (16 << 10)
    assert "about 1.3 MiB of it (~100%) allocated at main (leak_beside_peaks.c:17)" in " ".join(leak["evidence"])
