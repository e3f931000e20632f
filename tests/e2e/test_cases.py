"""memsleuth case: each seed case run small, asserting on its measured evidence, never on times."""
from __future__ import annotations

import shutil

import json
import subprocess

import pytest

from memsleuth.measure import allocators, native
from memsleuth.cases import alloc_churn, cache_flush, first_touch, thread_heap
from memsleuth.records.store import Store
from conftest import fixture, memsleuth, needs_tracepoints

PAGE = 4096


def run_case(tmp_path, *args: str):
    db, js = tmp_path / "c.db", tmp_path / "c.json"
    proc = memsleuth("case", *args, "--db", str(db), "--json", str(js))
    assert proc.returncode == 0, proc.stderr
    run = Store(db).load_run(None)
    return run, json.loads(js.read_text()), proc.stdout


def cell(stored, allocator: str = "glibc", **labels):
    found = [c for c in stored.cells if c.allocator.name == allocator and
             all(str(c.params.get(k)) == str(v) for k, v in labels.items())]
    assert len(found) == 1, (labels, [c.params for c in stored.cells])
    return found[0]


def test_list_names_every_case():
    proc = memsleuth("case", "--list")
    assert proc.returncode == 0, proc.stderr
    for name in ("alloc-churn", "first-touch", "thread-heap", "cache-flush", "allocator-shootout"):
        assert name in proc.stdout


@pytest.mark.parametrize("args, needle", [
    (["case"], "case needs a name"),
    (["case", "no-such-case"], "unknown case 'no-such-case'"),
    (["case", "first-touch", "--param", "setups=warm"], "must be one of"),
    (["case", "first-touch", "--param", "bytes=lots"], "must be a size"),
    (["case", "alloc-churn", "--param", "colour=red"], "unknown parameter 'colour'"),
    (["case", "alloc-churn", "--param", "steps"], "expected KEY=VALUE"),
    (["case", "alloc-churn", "--reps", "0"], "--reps must be at least 1"),
])
def test_bad_case_input_is_one_line(args, needle, tmp_path):
    proc = memsleuth(*args, "--db", str(tmp_path / "x.db"))
    assert proc.returncode == 2
    assert needle in proc.stderr and "Traceback" not in proc.stderr


# ---- alloc-churn (seed 000) ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def churn(tmp_path_factory):
    # 4 buffers of 2 MiB: past glibc's initial 128 KiB mmap threshold, so the first free raises
    # the threshold and later steps take the buffers from the brk heap, as in the seed.
    return run_case(tmp_path_factory.mktemp("churn"), "alloc-churn", "--alloc", "glibc", "--param", "steps=5",
                    "--param", "nbuf=4", "--param", "sizes=2M", "--param", "tunables=default,mmap_threshold",
                    "--reps", "1")


def test_alloc_churn_free_all_refaults_and_hoisted_does_not(churn):
    run, doc, out = churn
    free_all = alloc_churn._evidence(cell(run, variant="free-all", tunables="default"))
    hoisted = alloc_churn._evidence(cell(run, variant="hoisted", tunables="default"))
    pages = 4 * (2 << 20) / PAGE
    assert free_all.total_faults > 0.5 * pages
    assert hoisted.total_faults < 0.1 * pages
    assert free_all.total_faults > hoisted.total_faults
    # glibc trims the heap top in region free: the break moves down by about the step's bytes.
    assert -free_all.free_brk_delta >= 0.5 * 4 * (2 << 20)
    assert free_all.top_region == "init"
    assert "heap-top trimming" in out and doc["case"]["statements"]
    # The seed's loop is explained down to its call sites: the free() that trims, the line that re-faults.
    if shutil.which("perf"):
        text = " ".join(doc["case"]["statements"])
        assert "Call sites:" in text and "systrim" in text and "alloc_churn.c:" in text


@needs_tracepoints
def test_alloc_churn_leak_last_makes_fewer_brk_calls(churn):
    run, _, _ = churn
    free_all = alloc_churn._evidence(cell(run, variant="free-all", tunables="default"))
    leak_last = alloc_churn._evidence(cell(run, variant="leak-last", tunables="default"))
    assert leak_last.calls["brk"] < free_all.calls["brk"]
    assert not leak_last.refaults


@needs_tracepoints
def test_alloc_churn_fixed_mmap_threshold_switches_to_munmap(churn):
    run, _, out = churn
    fixed = alloc_churn._evidence(cell(run, variant="free-all", tunables="mmap_threshold=128K"))
    assert fixed.calls["munmap"] >= 4 and fixed.refaults
    assert "mmap/munmap of the large blocks" in out


def test_alloc_churn_target_first_touch_moves_faults_into_target(churn):
    run, _, _ = churn
    e = alloc_churn._evidence(cell(run, variant="target-first-touch", tunables="default"))
    assert e.faults["target"] > 0.5 * e.pages and e.faults["init"] < 0.1 * e.pages


# ---- first-touch (seed 001) ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def touch(tmp_path_factory):
    return run_case(tmp_path_factory.mktemp("touch"), "first-touch", "--alloc", "glibc", "--param", "bytes=32M",
                    "--param", "setups=fresh,src-written,prefaulted,populate-write", "--reps", "1")


def test_first_touch_fresh_destination_takes_one_fault_per_page(touch):
    run, _, _ = touch
    pages = (32 << 20) / PAGE
    fresh_dst = first_touch._evidence(cell(run, setup="src-written"))
    assert 0.95 * pages <= fresh_dst.copy_faults <= 1.1 * pages
    pre = first_touch._evidence(cell(run, setup="prefaulted"))
    assert pre.copy_faults < 0.05 * pages
    assert pre.setup_faults >= 0.95 * pages   # the faults moved into the setup, outside the timed copy


def test_first_touch_flags_the_zero_page(touch):
    run, _, out = touch
    pages = (32 << 20) / PAGE
    fresh = first_touch._evidence(cell(run, setup="fresh"))
    # Both buffers fresh: the source's reads fault too, but map the zero page and add no RSS.
    assert 1.9 * pages <= fresh.copy_faults <= 2.2 * pages
    assert fresh.zero_page and fresh.zero_page_faults >= 0.9 * pages
    assert not first_touch._evidence(cell(run, setup="src-written")).zero_page
    assert "ZERO-PAGE" in out


def test_first_touch_populate_write_is_measured_or_reported(touch):
    run, _, out = touch
    e = first_touch._evidence(cell(run, setup="populate-write"))
    if e.supported:
        assert e.copy_faults < 0.05 * (32 << 20) / PAGE
    else:
        assert "not supported by this kernel" in out


# ---- thread-heap (seed 002) ----------------------------------------------------------------------

def test_thread_heap_arenas_threads_processes_and_arena_max(tmp_path):
    names = [a.name for a in allocators.available()]
    alloc = "glibc,mimalloc" if "mimalloc" in names else "glibc"
    run, _, out = run_case(tmp_path, "thread-heap", "--alloc", alloc, "--param", "threads=2", "--param", "calls=2000",
                           "--param", "elems=1024", "--param", "forms=local,thread_local",
                           "--param", "tunables=default,arena_max", "--reps", "1")
    threads = thread_heap._evidence(cell(run, form="local", mode="threads", tunables="default"))
    procs = thread_heap._evidence(cell(run, form="local", mode="processes", tunables="default"))
    capped = thread_heap._evidence(cell(run, form="local", mode="threads", tunables="arena_max=1"))
    assert len(threads.heaps) == 1 and len(threads.heaps[0]) >= 2    # the main arena and the threads'
    assert [len(h) for h in procs.heaps] == [1, 1, 1]    # the parent and each worker (it ends by _exit): one arena
    assert capped.heaps == [capped.heaps[0]] and len(capped.heaps[0]) == 1
    assert all(b > 0 for b in threads.heaps[0])
    assert threads.per_call and procs.per_call
    if "mimalloc" in alloc:
        mi = thread_heap._evidence(cell(run, "mimalloc", form="local", mode="threads", tunables="default"))
        assert mi.heaps is None and "mimalloc" in mi.malloc_object
        assert "no arena evidence" in out
    # the glibc-only tunable never runs under another allocator
    assert not [c for c in run.cells if c.allocator.name != "glibc" and c.params["tunables"] != "default"]


def test_thread_heap_refuses_a_bad_argument():
    proc = subprocess.run([str(native.native_path("thread-heap")), "--mode=processes", "--threads=2", "--calls=1",
                           "--elems=-1"], capture_output=True, text=True)
    assert proc.returncode == 2 and "--elems" in proc.stderr


# ---- cache-flush (seed 004) ----------------------------------------------------------------------

def _cpuinfo_flags() -> set[str]:
    for line in open("/proc/cpuinfo"):
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def test_cache_flush_detect_agrees_with_the_kernel():
    out = subprocess.run([str(native.native_path("cache-flush")), "--op=detect"], capture_output=True, text=True)
    cpu = json.loads(out.stdout)["cpu"]
    flags = _cpuinfo_flags()
    if not cpu["x86"]:
        pytest.skip("not an x86 CPU: every flush op is reported unsupported")
    for flag in ("clflush", "clflushopt", "clwb", "sse2"):
        assert cpu[flag] == (flag in flags), flag


def test_cache_flush_lists_only_what_cpuid_has(tmp_path):
    run, _, out = run_case(tmp_path, "cache-flush", "--param", "bytes=1M", "--param", "passes=2", "--reps", "1")
    flags = _cpuinfo_flags()
    ops = {c.params["op"] for c in run.cells}
    for op, flag in cache_flush.CPUID_FLAG.items():
        if flag in flags:
            assert op in ops
            e = cache_flush._evidence(cell(run, op=op))
            assert e.gbs and e.gbs > 0 and e.faults_per_pass == 0
        else:
            assert op not in ops and f"{op}: not supported on this CPU" in out
    assert "memset" in ops


def test_cache_flush_program_never_executes_a_missing_instruction():
    # Asked for an op, the program checks CPUID itself; on a CPU that has it, it runs.
    out = subprocess.run([str(native.native_path("cache-flush")), "--op=clwb", "--bytes=65536", "--passes=1"],
                         capture_output=True, text=True)
    assert out.returncode == 0
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["supported"] == ("clwb" in _cpuinfo_flags())


# ---- allocator-shootout (seed 003) ----------------------------------------------------------------

def test_shootout_records_oom_as_a_result(tmp_path):
    leak = fixture("libfx-leak.so")
    run, doc, out = run_case(tmp_path, "allocator-shootout", "--alloc", f"glibc,leaky={leak}",
                             "--param", "iterations=20000", "--param", "ws=100",
                             "--param", "long-iterations=3000000", "--param", "long-ws=1000",
                             "--mem-limit", "64M", "--reps", "1")
    long_leaky = cell(run, "leaky", run="long")
    assert {s.status for _, _, s in long_leaky.samples} == {"oom"}
    assert all(s.ok for _, _, s in cell(run, "glibc", run="long").samples)
    assert all(s.ok for _, _, s in cell(run, "leaky", run="sweep").samples)
    assert "ended OOM" in out
    assert doc["case"]["question"] and doc["case"]["tables"][0]["rows"]


def test_show_reprints_a_stored_case(tmp_path):
    run, _, out = run_case(tmp_path, "cache-flush", "--param", "bytes=256K", "--param", "passes=1",
                           "--param", "ops=memset", "--reps", "1")
    again = memsleuth("show", "--db", str(tmp_path / "c.db"))
    assert again.returncode == 0, again.stderr
    assert "What the evidence shows" in again.stdout and "Question:" in again.stdout


def test_parameter_kinds_parse_sizes_counts_and_choices():
    from memsleuth.errors import UsageError
    from memsleuth.measure.workloads.base import Param
    assert Param("b", 0, 1, 1 << 40, kind="size").parse("4M", "t") == 4 << 20
    assert Param("s", "", 64, 1 << 40, kind="sizes").parse("4M,1K", "t") == f"{4 << 20},1024"
    assert Param("w", "", 1, 1 << 30, kind="counts").parse("400,40k", "t") == "400,40000"
    assert Param("v", "a", kind="choices", choices=("a", "b")).parse("b,a,b", "t") == ("b", "a")
    assert Param("v", "a", kind="choice", choices=("a", "b")).parse("b", "t") == "b"
    for p, text in [(Param("v", "a", kind="choice", choices=("a",)), "c"), (Param("b", 0, 4096, 1 << 40, kind="size"), "1K"),
                    (Param("w", "", 1, 10, kind="counts"), "5,11")]:
        with pytest.raises(UsageError):
            p.parse(text, "t")
