"""Costs measured, not estimated (issue 32): the explaining run's sampled CPU time by kernel path,
held against an independent reference, `perf record -e cpu-clock -g` on the same program in the
same test; causes traced by the faults' addresses; process trees judged per program; a preload
that did not reach a program of the tree. Real processes, root (kernel call chains)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import fixture, memsleuth, needs_tracepoints
from perf_reference import fault_kind_share, perf_shares as perf_of
from test_corpus import check, mechanisms


def perf_shares(tmp_path, *cmd: str) -> dict[str, float]:
    return perf_of(tmp_path / "perf.data", *cmd)

pytestmark = [needs_tracepoints,
              pytest.mark.skipif(shutil.which("perf") is None, reason="perf (linux-perf) is not installed")]

def findings_of(doc: dict) -> dict[str, dict]:
    """The mechanism findings of a check's JSON, by id."""
    return {f["id"]: f for f in mechanisms(doc)}


def within(got: float, reference: float) -> bool:
    return 0.75 <= got / reference <= 1.33


def bracketed(tmp_path, cmd: list[str], run, under: tuple[str, ...] = (), after: int = 1) -> tuple[dict, list[dict]]:
    """memsleuth's check between perf references of the same command (one before, `after` after): on
    a busy machine a fault's cost moves from one run to the next, perf's too, so a figure is held
    within 0.75-1.33x of the references' range (within_range), not of one run's. `under`: perf_shares'."""
    refs = [perf_of(tmp_path / "perf-before.data", *cmd, under=under)]
    doc = run()
    refs += [perf_of(tmp_path / f"perf-after{k}.data", *cmd, under=under) for k in range(after)]
    return doc, refs


def within_range(got: float, references: list[float]) -> bool:
    return 0.75 * min(references) <= got <= 1.33 * max(references)


def within_kernel(doc: dict, finding: dict, refs: list[dict], part) -> bool:
    """A kernel mechanism's cost held as a share of the kernel's time, against perf's `part` (a function
    of one reference) as a share of its run's kernel samples, within 0.75-1.33x of the references' range.
    On this VM one run's page faults cost up to twice another's (system time 0.33-0.65 s of the same
    0.7 s program), so the kernel's share of a run moves from run to run, perf's runs' too; which part of
    that time is the mechanism's does not (0.80-0.84 of it for NumPy's temporaries over six runs). The
    run's kernel share is its rusage (the base every cost is split from, analysis/cost.py)."""
    kernel = doc["cells"][0]["summary"]["evidence"]["sys_share"]
    got = finding["cost_share"] / kernel
    return within_range(got, [part(r) / (1.0 - r.get("user", 0.0)) for r in refs])


def test_three_mechanisms_sharing_the_same_faults_never_claim_them_twice(tmp_path):
    """A string doubled to 42 MiB per request and freed (plain-string_grow): mremap growth, the munmap
    of each freed buffer and first touches share the page faults. Each fault is claimed once, so the
    time findings add up to at most the kernel's share perf sees (they used to reach 152%). The faults
    are the per-request buffers', each freed and the next one mapped fresh: mmap churn comes first.
    (Realloc growth came first while ms-run kept each mremap move's old place as a mapping of its own,
    so the faults made before a move never read as given back; reserving the 64 MiB up front saves
    ~5% of this program here, 0.80 -> 0.76 s, so growth is not where its time goes.)"""
    cmd = [fixture("plain-string_grow")]
    doc = check(tmp_path, *cmd)
    ref = perf_shares(tmp_path, *cmd)
    timed = [f for f in mechanisms(doc) if f["cost_share"] is not None and f["cost_ns"]]
    assert timed[0]["id"] == "mmap-churn", [(f["id"], f["cost_share"]) for f in timed]
    kernel = 1.0 - ref["user"]
    total = sum(f["cost_share"] for f in timed)
    assert total <= min(1.0, 1.15 * kernel), ([(f["id"], f["cost_share"]) for f in timed], kernel)


def test_two_causes_of_the_same_faults_are_told_apart_and_costed_as_perf_sees_them(tmp_path):
    """Each step's buffer is written after mmap and again after MADV_DONTNEED: half the faults are
    each call's. The sampled paths match perf's shares, and each finding's cost is its calls'
    share plus half the faults' (the program's own structure), within 0.75-1.33x."""
    cmd = [fixture("plain-refault_mix"), "60"]
    doc = check(tmp_path, *cmd)
    ref = perf_shares(tmp_path, *cmd)
    paths = {p["name"]: p["share"] for p in doc["cpu_time_by_path"]}
    assert ref["page-faults"] > 0.3
    assert within(paths["page-faults"], ref["page-faults"]), (paths, ref)
    found = findings_of(doc)
    madvise, churn = found["madvise-storm"], found["mmap-churn"]
    assert within(madvise["cost_share"], ref.get("madvise", 0) + ref["page-faults"] / 2), (madvise["title"], ref)
    assert within(churn["cost_share"], ref.get("munmap", 0) + ref.get("mmap", 0) + ref["page-faults"] / 2), \
        (churn["title"], ref)
    for f in (madvise, churn):
        assert "sampled, 95% CI" in f["title"]
        assert any("sampled time is in memory given back before" in e for e in f["evidence"]), f
    # the faults' addresses, joined to the samples taken in them, say it: half and half
    traced = [e for e in madvise["evidence"] if "sampled time is in memory given back" in e][0]
    assert 35 <= int(re.match(r"(\d+)%", traced.strip(" -")).group(1)) <= 65, traced


def test_a_tree_of_programs_is_judged_per_program_not_against_one_peak(tmp_path):
    """24 processes each first-touching 32 MiB: 768 MiB of faults against a 32 MiB peak. That is
    not the zero page (the old reading); it is first touches, paid by 24 processes of one program."""
    prog = fixture("plain-bigtouch")
    doc = check(tmp_path, "sh", "-c", f"for i in $(seq 24); do {prog} 32; done")
    found = findings_of(doc)
    assert "zero-page-read" not in found, found.get("zero-page-read", {}).get("title")
    first = found["first-touch"]
    assert re.search(r"2[0-9] processes of plain-bigtouch", first["mechanism"]), first["mechanism"]
    exes = {e[0]: e for e in doc["cpu_profile"]["executables"]}
    assert exes["plain-bigtouch"][2] >= 20                    # processes seen by the sampler
    assert "CPU time by executable (sampled)" in doc["_stdout"]


def test_a_preload_that_does_not_reach_the_program_is_never_an_ok_cell(tmp_path):
    from memsleuth.measure import allocators
    other = next((a for a in allocators.available() if a.preload), None)
    if other is None:
        pytest.skip("no allocator package installed besides glibc")
    js = tmp_path / "p.json"
    prog = fixture("plain-refault_mix")
    proc = memsleuth("compare", "--alloc", f"glibc,{other.name}", "--reps", "2", "--db", str(tmp_path / "p.db"),
                     "--json", str(js), "--", "sh", "-c", f"exec env -i {prog} 20")
    assert proc.returncode == 0, proc.stderr
    cells = {c["allocator"]["name"]: c for c in json.loads(js.read_text())["cells"]}
    missed = [f for f in cells[other.name]["summary"]["findings"] if f["id"] == "preload-missed"]
    assert missed and missed[0]["confidence"] == "high", [f["id"] for f in cells[other.name]["summary"]["findings"]]
    assert "plain-refault_m" in missed[0]["evidence"][0]          # the program, by its command name
    assert not [f for f in cells["glibc"]["summary"]["findings"] if f["id"] == "preload-missed"]
    assert "never reached the measured program" in proc.stdout
    # never an ok cell: its figures are the default allocator's, so it is not ranked
    assert cells[other.name]["summary"]["status"] == "preload-failed"
    assert cells["glibc"]["summary"]["status"] == "ok"
    assert "PRELOAD-FAILED: not ranked" in proc.stdout
    # the same command without env -i: the preload reaches it, and nothing is said
    js2 = tmp_path / "q.json"
    proc = memsleuth("compare", "--alloc", other.name, "--reps", "2", "--db", str(tmp_path / "q.db"), "--json",
                     str(js2), "--", "sh", "-c", f"exec {prog} 20")
    assert proc.returncode == 0, proc.stderr
    cell = json.loads(js2.read_text())["cells"][0]
    assert not [f for f in cell["summary"]["findings"] if f["id"] == "preload-missed"]



def test_copy_on_write_after_fork_is_named_and_costed_as_perf_sees_it(tmp_path):
    """Workers forked from a parent that filled 128 MiB write one byte per page of it: the faults copy
    pages. The finding says copy-on-write (never fresh memory) at perf's share of those faults."""
    cmd = [fixture("plain-cow_fork"), "4"]
    doc, refs = bracketed(tmp_path, cmd, lambda: check(tmp_path, *cmd))
    ref = refs[-1]
    found = findings_of(doc)
    cow = found["copy-on-write-faults"]
    assert within_kernel(doc, cow, refs, lambda r: fault_kind_share(r, "copy-on-write")), (cow["title"], refs)
    assert "fork" in cow["mechanism"] and "threads" in cow["advice"]
    ft = found.get("first-touch")
    assert ft is None or ft["cost_share"] <= 1.33 * fault_kind_share(ref, "zero-fill") + 0.02, (ft["title"], ref)


def test_a_file_mapped_per_request_is_named_file_backed_not_fresh_memory(tmp_path):
    cmd = [fixture("plain-map_file"), str(tmp_path / "index"), "40"]
    doc, refs = bracketed(tmp_path, cmd, lambda: check(tmp_path, *cmd))
    found = findings_of(doc)
    fb = found["file-backed-faults"]
    assert within_kernel(doc, fb, refs, lambda r: fault_kind_share(r, "file-backed")), (fb["title"], refs)
    assert "first-touch" not in found and "zero-page-read" not in found, list(found)
    churn = found.get("mmap-churn")
    if churn is not None:        # the calls' own cost, worded as a file's mappings, never as memory given back
        assert "file" in churn["title"] and "fresh memory" not in churn["mechanism"], churn
    total = sum(f["cost_share"] or 0 for f in found.values() if f.get("cost_ns") is not None)
    assert total <= 1.0, found


def test_a_mapped_file_written_and_synced_again_is_a_shared_file_write_not_copy_on_write(tmp_path):
    """A store keeps a file mapped MAP_SHARED, writes a byte per page and msyncs, pass after pass: every
    write after a writeback faults for the file system to dirty the page again (page_mkwrite, through
    do_wp_page). The finding names that, at perf's share, never copy-on-write and its fork advice."""
    fs = subprocess.run(["stat", "-f", "-c", "%T", str(tmp_path)], capture_output=True, text=True).stdout.strip()
    if fs in ("tmpfs", "ramfs"):
        pytest.skip(f"{tmp_path} is on {fs}: its pages are never written back, so no write faults again")
    # 30 passes: about 0.5-0.7 s of CPU, so that perf's 1 kHz reference takes well over its floor of 200
    # samples (12 passes took 0.19-0.28 s here; one CI's reference took 190)
    cmd = [fixture("plain-shared_file_write"), str(tmp_path / "store"), "30"]
    doc, refs = bracketed(tmp_path, cmd, lambda: check(tmp_path, *cmd))
    found = findings_of(doc)
    sw = found["shared-file-write-faults"]
    assert within_kernel(doc, sw, refs, lambda r: fault_kind_share(r, "shared-file-write")), (sw["title"], refs)
    assert "msync" in sw["mechanism"] and "fork" not in sw["advice"], sw
    cow = found.get("copy-on-write-faults")
    assert cow is None or cow["cost_share"] < 0.25 * sw["cost_share"], (cow["title"], sw["title"])
    assert "first-touch" not in found, list(found)


@pytest.mark.parametrize("prog,args,fid,phase", [
    ("plain-map_per_request", ["150"], "mmap-churn", "steady state"),        # a mapping per request, all run long
    # the working set filled first; the compute long enough that the fill ends before mid-run even when
    # this VM's faults are slow (512 MiB took 0.73 s of a 1.59 s run once)
    ("plain-fill_then_compute", ["256", "300000000"], "first-touch", "start-up"),
])
def test_the_phase_is_read_from_the_costs_own_sampled_times(tmp_path, prog, args, fid, phase):
    doc = check(tmp_path, fixture(prog), *args)
    f = findings_of(doc)[fid]
    assert f["phase"] == phase, [e for e in f["evidence"] if "holds 80%" in e]
    assert any(e.startswith(phase + ":") and "of its sampled time" in e for e in f["evidence"]), f["evidence"]
    p = doc["cpu_profile"]
    assert p["when_bucket_ns"] > 0 and 16 <= p["when_span_ns"] / p["when_bucket_ns"] <= 32
    assert sum(p["when"]["page-faults"]) == p["counts"]["page-faults"]     # every sample has its time


def test_a_python_fork_pool_that_reads_its_parents_table_is_copy_on_write(tmp_path):
    """A parent builds 1.5M tuples, then forked workers only read them (runtimes/forkscan.py):
    reading a Python object writes its reference count, so the pages are copied. The finding says
    copy-on-write at perf's share, with CPython's advice (gc.freeze before forking), not first touches."""
    import sys
    from pathlib import Path
    cmd = [sys.executable, str(Path(__file__).resolve().parent / "runtimes" / "forkscan.py")]
    doc, refs = bracketed(tmp_path, cmd, lambda: check(tmp_path, *cmd))
    found = findings_of(doc)
    cow = found["copy-on-write-faults"]
    assert within_kernel(doc, cow, refs, lambda r: fault_kind_share(r, "copy-on-write")), (cow["title"], refs)
    assert "gc.freeze()" in cow["advice"] and "threads" in cow["advice"]
    assert list(found)[0] == "copy-on-write-faults", list(found)        # the largest, first


def test_a_sparse_table_asked_for_huge_pages_is_told_to_leave_them_off(tmp_path):
    """A 256 MiB table mapped per job with MADV_HUGEPAGE, 2,000 slots written (plain-sparse_huge):
    each write zeroes a whole 2 MiB page. The churn's words and advice name the huge pages (leave them
    off), the advice never asks for them, and the cost is the kernel's share perf sees."""
    from pathlib import Path
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if not thp.exists() or "[never]" in thp.read_text():
        pytest.skip("transparent huge pages are off on this machine")
    cmd = [fixture("plain-sparse_huge")]
    doc, refs = bracketed(tmp_path, cmd, lambda: check(tmp_path, *cmd))
    found = findings_of(doc)
    f = found["mmap-churn"]
    assert "huge page" in f["mechanism"] and "MADV_NOHUGEPAGE" in f["advice"], (f["mechanism"], f["advice"])
    assert not any("use huge pages" in x["advice"] for x in found.values()), [x["advice"] for x in found.values()]
    assert within_kernel(doc, f, refs, lambda r: 1.0 - r.get("user", 0.0)), (f["title"], refs)
    # Every job's faults are in its fresh mapping: the samples taken in them join those faults, never
    # a first touch. (They joined 'none' in stretches while the sampler's own walk of the user stack,
    # a kernel fault on address 0 in interrupt context, was traced as the thread's latest fault.)
    joined = doc["cpu_profile"]["fault_release"]
    assert joined.get("none", 0) <= 0.05 * sum(joined.values()), joined


def test_churn_beside_a_storm_of_small_mappings_is_churn_not_first_touch(tmp_path):
    """Workers map, write and unmap 8 MiB buffers while another thread maps and unmaps 64 KiB in a
    loop (plain-busy_mapper). The storm makes the explaining run record one small call in P; the
    large mappings and unmaps are still recorded at every call, so the workers' faults are in
    fresh mappings that munmap gave back: mmap churn at perf's kernel share, and no first touch
    (with every mapping sampled, 88% of them read as first touches and first-touch claimed 51%)."""
    cmd = [fixture("plain-busy_mapper")]
    doc, refs = bracketed(tmp_path, cmd, lambda: check(tmp_path, *cmd))
    found = findings_of(doc)
    assert "first-touch" not in found, {k: v["title"] for k, v in found.items()}
    f = found["mmap-churn"]
    args = doc["cells"][0]["samples"][-1]["syscall_args"]
    assert args["munmap"].get("every", 1) > 1, args["munmap"]      # the storm was sampled
    joined = doc["cpu_profile"]["fault_release"]
    assert joined.get("none", 0) <= 0.05 * sum(joined.values()), joined
    assert within_kernel(doc, f, refs, lambda r: 1.0 - r.get("user", 0.0)), (f["title"], refs)


def test_writes_to_a_private_file_mapping_are_named_its_copies_not_fresh_memory(tmp_path):
    """A 64 MiB file mapped MAP_PRIVATE per job and every page patched (plain-private_write): each first
    write copies the file's page. 6.18 inlines do_cow_fault, so the copy is read from do_fault's own
    callees; the faults are named the private mapping's copies, never fresh memory or fork's
    copy-on-write, at perf's share of the copying faults."""
    data = tmp_path / "data.bin"
    data.write_bytes(bytes(range(256)) * (64 << 12))
    # Its pages clean before any run: with the 64 MiB just written still dirty, the runs' faults met its
    # writeback (likely; not traced), perf's references read 36-60% of the faults shown as copies against
    # memsleuth's 55-60%, and the test failed 3 runs in 9 here and once in CI; after os.sync, 9 of 9 passed.
    os.sync()
    cmd = [fixture("plain-private_write"), str(data), "24"]
    doc, refs = bracketed(tmp_path, cmd, lambda: check(tmp_path, *cmd))
    found = findings_of(doc)
    f = found["private-file-copy-faults"]
    assert "MAP_PRIVATE" in f["mechanism"] and "read() the file once" in f["advice"], f
    assert not {"first-touch", "copy-on-write-faults"} & set(found), list(found)
    assert within_kernel(doc, f, refs, lambda r: fault_kind_share(r, "private-copy")), (f["title"], refs)


def test_an_arena_trimming_its_reservations_keeps_fresh_memory_not_churn(tmp_path):
    """An arena that maps twice a 2 MiB chunk, unmaps the part outside the alignment and keeps the chunk
    (plain-aligned_arena, as jemalloc and Go reserve). The kernel pads each search by 2 MiB for a
    huge-page alignment, and each trim unmaps memory beside the chunks kept: the faults are first
    touches of kept memory, never mmap churn (they read 91% churn while a mapping's range held its pad)."""
    cmd = [fixture("plain-aligned_arena")]
    doc, refs = bracketed(tmp_path, cmd, lambda: check(tmp_path, *cmd))
    found = findings_of(doc)
    assert "mmap-churn" not in found, found["mmap-churn"]["title"]
    f = found["first-touch"]
    assert within_kernel(doc, f, refs, lambda r: r["page-faults"]), (f["title"], refs)


def test_a_guard_page_toggled_per_task_is_named_mprotect_and_the_programs(tmp_path):
    cmd = [fixture("plain-guard_pages"), "300000"]
    doc, refs = bracketed(tmp_path, cmd, lambda: check(tmp_path, *cmd))
    found = findings_of(doc)
    f = found["mprotect-calls"]
    assert within_kernel(doc, f, refs, lambda r: r.get("mprotect", 0.0)), (f["title"], refs)
    assert f["who"] == "program" and "guard page" in f["advice"], f
    assert "kernel-time" not in found, list(found)


def test_forking_a_large_parent_is_named_process_creation_at_perfs_share(tmp_path):
    cmd = [fixture("plain-fork_big"), "512", "120"]
    doc, refs = bracketed(tmp_path, cmd, lambda: check(tmp_path, *cmd))
    found = findings_of(doc)
    f = found["process-creation"]
    assert within_kernel(doc, f, refs, lambda r: r.get("execve", 0.0) + r.get("clone", 0.0)), (f, refs)
    assert "page tables" in f["mechanism"] and "posix_spawn" in f["advice"], f
    assert f["cost_share"] >= max(x["cost_share"] or 0 for x in found.values()), found   # the largest, first
    total = sum(x["cost_share"] or 0 for x in found.values() if x.get("cost_ns") is not None)
    assert total <= 1.0, found


def test_a_fresh_buffer_faulted_in_by_read_is_churn_of_the_allocators_mappings(tmp_path):
    # The faults are taken inside read() (the kernel copying into pages never written): they are
    # the fresh mapping's faults, traced by address like a program's own, not read's time.
    cmd = [fixture("plain-read_fresh"), str(tmp_path), "100"]
    doc, refs = bracketed(tmp_path, cmd, lambda: check(tmp_path, *cmd))
    found = findings_of(doc)
    f = found["mmap-churn"]
    assert within_kernel(doc, f, refs, lambda r: r.get("page-faults", 0.0) + r.get("munmap", 0.0) + r.get("mmap", 0.0)), \
        (f["title"], refs)
    assert f["who"] == "allocator" and "faulted in again" in f["mechanism"], f
    assert found.get("first-touch") is None or found["first-touch"]["confidence"] == "low", found


def test_shared_anonymous_memory_faulted_per_request_is_named_shared_memory_never_a_file(tmp_path):
    cmd = [fixture("plain-shared_anon"), "40"]
    doc, refs = bracketed(tmp_path, cmd, lambda: check(tmp_path, *cmd))
    found = findings_of(doc)
    f = found["shared-memory-faults"]
    assert within_kernel(doc, f, refs, lambda r: r["page-faults"]), (f["title"], refs)
    assert "file-backed-faults" not in found, list(found)
    assert "MAP_PRIVATE" in f["advice"], f


def allocator_time_at_perfs_share(tmp_path, cmd: list[str], pattern: str) -> dict:
    """check's allocator-time finding on `cmd`, its share held against perf's share of the samples
    whose innermost function matches `pattern`, perf run before and after check."""
    from perf_reference import perf_innermost_share
    refs = [perf_innermost_share(tmp_path / "perf-before.data", pattern, *cmd)]
    doc = check(tmp_path, *cmd)
    refs.append(perf_innermost_share(tmp_path / "perf-after.data", pattern, *cmd))
    f = findings_of(doc)["allocator-time"]
    assert within_range(f["cost_share"], refs), (f["title"], refs)
    return f


def test_time_in_malloc_and_free_is_the_allocators_at_perfs_share(tmp_path):
    from memsleuth.analysis.user_time import ALLOCATOR_FRAMES
    f = allocator_time_at_perfs_share(tmp_path, [fixture("plain-small_blocks"), "40"], ALLOCATOR_FRAMES.pattern)
    assert f["who"] == "allocator" and "_int_free" in " ".join(f["evidence"]), f
    assert "--try" in f["advice"], f


def test_calloc_clearing_a_reused_block_is_the_allocators_time_at_perfs_share_of_memset(tmp_path):
    """A 4 MiB calloc per request (plain-calloc_clear): glibc's calloc ends by jumping to memset, so
    neither calloc nor the handler is in a frame-pointer chain of memset (perf's own chains say
    memset <- main). The word at the stack pointer names the handler, and the call before it calloc:
    the allocator's time, said as clearing, at perf's share of memset."""
    from memsleuth.analysis.user_time import ZEROING_FRAMES
    f = allocator_time_at_perfs_share(tmp_path, [fixture("plain-calloc_clear")], ZEROING_FRAMES.pattern)
    evidence = " ".join(f["evidence"])
    assert "clearing" in f["title"] and "by function: calloc" in evidence and "called from: handle" in evidence, f


def test_blocks_realloc_moves_are_the_allocators_time_at_perfs_share_of_its_code_and_copying(tmp_path):
    """Two buffers grown side by side by 4 KiB reallocs (plain-realloc_side): glibc's _int_realloc
    copies each into a new block at every step. Its memcpy, under _int_realloc by the leaf's return
    address (frame pointers skip it), is the allocator's time, said as copying, at perf's share of
    malloc's functions and memcpy together."""
    from memsleuth.analysis.user_time import ALLOCATOR_FRAMES, COPYING_FRAMES
    f = allocator_time_at_perfs_share(tmp_path, [fixture("plain-realloc_side")],
                                      f"{ALLOCATOR_FRAMES.pattern}|{COPYING_FRAMES.pattern}")
    assert "copying blocks that realloc moves" in f["title"] and "_int_realloc" in " ".join(f["evidence"]), f


def test_a_thread_per_task_is_named_thread_creation_never_lock_contention(tmp_path):
    """20,000 short tasks, each on a new thread joined before the next (plain-thread_per_task): clone is
    nearly all of the CPU time, and each join waits on a futex. The finding is thread creation, the
    program's, with a pool as the change, at the kernel's share of the program run alone (its own
    rusage: perf's cpu-clock takes a handful of samples here, each thread's count starting afresh);
    the joins' futex calls are no lock contention."""
    import os
    import subprocess
    cmd = [fixture("plain-thread_per_task")]
    alone = []
    for _ in range(2):
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
        _, _, ru = os.wait4(proc.pid, 0)
        alone.append(ru.ru_stime / (ru.ru_utime + ru.ru_stime))
    doc = check(tmp_path, *cmd)
    found = findings_of(doc)
    f = found["thread-creation"]
    assert f["who"] == "program" and "thread pool" in f["advice"], f
    assert "lock-contention" not in found, found["lock-contention"]["title"]
    assert 0.75 * min(alone) <= f["cost_share"] <= min(1.0, 1.33 * max(alone)), (f["title"], alone)


def test_memory_locked_per_job_is_named_locking_at_perfs_share(tmp_path):
    """32 MiB mapped, locked, unlocked and unmapped per job (plain-lock_per_job): mlock faults in and pins
    every page, and no counted call explains that time. It is named memory locking at perf's share of
    mlock and munlock, beside whatever the munmaps get."""
    cmd = [fixture("plain-lock_per_job")]
    doc, refs = bracketed(tmp_path, cmd, lambda: check(tmp_path, *cmd))
    found = findings_of(doc)
    f = found["memory-locking"]
    assert "pins" in f["mechanism"] and "locked pool" in f["advice"], f
    assert within_kernel(doc, f, refs, lambda r: r.get("mlock", 0.0) + r.get("munlock", 0.0)), (f["title"], refs)
    assert list(found)[0] == "memory-locking", list(found)        # the largest, first


def test_a_calibration_started_early_is_the_one_read_and_only_once():
    """check starts ms-calibrate beside its own imports (machine.calibrate_soon); unit_costs reads
    that one, validated like any, and the next session's unit_costs runs a fresh one."""
    from memsleuth.analysis import cost
    from memsleuth.measure import machine
    machine.calibrate_soon()
    started = machine._calibrating
    if started is None:
        pytest.skip("this process may run on one CPU only: the calibration is not started early there")
    machine.calibrate_soon()
    assert machine._calibrating is started, "a second call starts no second calibration"
    first = machine.unit_costs()
    assert machine._calibrating is None and started.stdout.closed
    units = cost.UnitCosts.from_dict(first)
    assert units is not None and units.fault_ns > 0
    assert {"mmap", "munmap", "madvise", "brk"} <= set(first["syscall_ns"])
    assert cost.UnitCosts.from_dict(machine.unit_costs()) is not None
