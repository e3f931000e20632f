"""Who ran the CPU time (analysis/user_time.py) and the garbage-collection rule, on stored data:
tests/data/check-go-gc.db is a real `memsleuth check -- env GOGC=20 gcheap` (tests/e2e/runtimes/
gcheap.go, a Go service tracing a million live nodes), and hand-made stacks for the other runtimes'
frames as their symbols name them."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from memsleuth.analysis import cost, runtimes, tries, user_time
from memsleuth.records.cpu_stacks import CpuStacks, UserStack

DATA = Path(__file__).resolve().parents[1] / "data" / "check-go-gc.db"


@pytest.fixture(scope="module")
def analysis(tmp_path_factory):
    from memsleuth.analysis.summary import analyse_check
    from memsleuth.records.store import Store
    copy = tmp_path_factory.mktemp("db") / DATA.name
    shutil.copy(DATA, copy)
    store = Store(str(copy), readonly=True)
    run = store.load_run(store.list_runs()[0].id)
    store.close()
    return analyse_check(run)


def test_every_sample_is_in_exactly_one_part(analysis):
    s = analysis.view.cpu_stacks
    assert s is not None and s.samples > 1000
    parts = user_time.who_ran(s)
    assert sum(p.samples for p in parts) == s.samples
    assert {p.name for p in parts} >= {"the Go runtime's garbage collector", "the kernel"}
    kernel = next(p for p in parts if p.name == "the kernel")
    assert kernel.samples == s.kernel


def test_the_collector_is_found_from_its_frames_and_costed_by_its_user_mode_samples(analysis):
    f = next(f for f in analysis.findings if f.id == "garbage-collection")
    c = user_time.collectors(analysis.view.cpu_stacks)[0]
    assert c.runtime.name == "the Go runtime" and f.numbers["runtime"] == "the Go runtime" and f.who == "runtime"
    # in the measured runs' account: its share of the user-mode samples, of the measured user time
    s, whole = analysis.view.cpu_stacks, analysis.view.process
    user_share = whole.user_ns / (whole.user_ns + whole.sys_ns)
    base = s.samples - s.kernel - cost.own_user_samples(s)
    assert f.cost_share == pytest.approx(c.samples / base * user_share) and f.cost_share > 0.5
    assert f.cost_ns == pytest.approx(f.cost_share * (whole.user_ns + whole.sys_ns))
    assert all(fn.startswith(("runtime.", "internal/runtime/gc")) for fn, _ in c.functions), c.functions
    assert "GOGC" in f.advice and "allocator" not in f.advice
    # the collector's own time is user mode: with the kernel's findings it stays within the CPU time
    assert sum(x.cost_share for x in analysis.findings if x.cost_share is not None and x.cost_ns) <= 1.0


def test_a_collector_finding_is_tried_with_the_runtimes_own_knob(analysis):
    found = [f for f in analysis.findings if f.id == "garbage-collection"]
    cands = tries.for_findings(found, "glibc", list(tries.OTHER_ALLOCATORS))
    assert [(t.name, t.env, t.allocator) for t in cands] == [("GOGC=200", {"GOGC": "200"}, None)]
    assert "peak RSS" in cands[0].evidence      # collecting less often keeps more garbage: its memory is shown


def _stacks(*rows: tuple[bool, int, tuple[str, ...]]) -> CpuStacks:
    stacks = tuple(UserStack("prog", k, n, fns) for k, n, fns in rows)
    return CpuStacks(1_000_000, sum(n for _, n, _ in rows), sum(n for k, n, _ in rows if k), stacks)


def test_memsleuths_own_user_samples_are_no_part_of_the_measured_user_time():
    """The heap accounting's wrappers of malloc (innermost "[memsleuth's own]") run in the explaining run
    only: a part is its share of the program's user-mode samples, theirs left out of the base."""
    from types import SimpleNamespace
    s = _stacks((False, 600, ("main",)), (False, 300, ("_int_malloc", "malloc", "main")),
                (False, 100, ("[memsleuth's own] malloc", "main")), (True, 200, ("do_page_fault",)))
    assert cost.own_user_samples(s) == 100
    sc = SimpleNamespace(user_ns=900e6, sys_ns=100e6)
    part = cost.user_part(sc, s, 300)
    assert part.ns == pytest.approx(300 / 900 * 900e6) and part.share == pytest.approx(0.3)


@pytest.mark.parametrize("functions,runtime", [
    (("G1ParScanThreadState::trim_queue_to_threshold(unsigned int)", "WorkerThread::run()"), "the JVM"),
    (("PSPromotionManager::drain_stacks_depth(bool)",), "the JVM"),
    (("void v8::internal::MarkingVisitorBase<v8::internal::MainMarkingVisitor>::ProcessStrongHeapObject()",
      "v8::internal::MarkCompactCollector::ProcessMarkingWorklist(unsigned long)"), "V8 (Node.js)"),
    (("heap::base::SlotCallbackResult v8::internal::Scavenger::ScavengeObject()",), "V8 (Node.js)"),
    (("_PyObject_IS_GC", "untrack_tuples", "gc_collect_main"), "CPython"),
    (("runtime.scanobject", "runtime.gcDrain", "runtime.gcBgMarkWorker"), "the Go runtime"),
])
def test_each_runtimes_collector_is_named_from_its_frames(functions, runtime):
    found = user_time.collectors(_stacks((False, 300, functions), (False, 700, ("main",))))
    assert [c.runtime.name for c in found] == [runtime]
    assert found[0].share == pytest.approx(0.3)


@pytest.mark.parametrize("functions", [
    ("G1CollectedHeap::attempt_allocation_slow(unsigned long)", "[anon]"),     # allocating, not collecting
    ("v8::internal::Factory::NewFixedArray(int)",),
    ("runtime.mallocgc", "main.main"),
    ("PyList_New", "_PyEval_EvalFrameDefault"),
])
def test_a_runtimes_allocation_path_is_not_its_collector(functions):
    assert user_time.collectors(_stacks((False, 500, functions), (False, 500, ("main",)))) == []


def test_a_collectors_kernel_samples_are_the_kernels_not_its_cost():
    s = _stacks((False, 200, ("runtime.scanobject",)), (True, 300, ("runtime.scanobject",)),
                (False, 500, ("main.main",)))
    c = user_time.collectors(s)[0]
    assert (c.samples, c.kernel_samples) == (200, 300) and c.share == pytest.approx(0.2)
    parts = {p.name: p.samples for p in user_time.who_ran(s)}
    assert parts == {"the kernel": 300, "the Go runtime's garbage collector": 200,
                     "the program and its libraries": 500}


def test_too_few_samples_read_no_share():
    assert user_time.collectors(_stacks((False, 50, ("runtime.scanobject",)))) == []
    assert user_time.who_ran(_stacks((False, 50, ("runtime.scanobject",)))) == []


def test_stored_stacks_read_back_the_same():
    s = _stacks((False, 200, ("runtime.scanobject", "runtime.gcDrain")), (True, 300, ("main.main",)))
    assert CpuStacks.from_dict(s.to_dict()) == s
    assert CpuStacks.from_dict({"opened": True, "samples": 3}) is None    # ms-run's bare summary is not one


def test_every_collector_pattern_is_its_own_runtimes():
    """No runtime's collector pattern matches another's collector frames."""
    frames = {"the Go runtime": "runtime.gcDrain", "the JVM": "G1ParScanThreadState::trim_queue_to_threshold()",
              "V8 (Node.js)": "v8::internal::Scavenger::Process()", "CPython": "gc_collect_main"}
    for rt in runtimes.TABLE:
        for name, fn in frames.items():
            assert bool(rt.gc.search(fn)) == (rt.name == name), (rt.name, fn)


def test_the_user_chains_are_a_stack_set_for_flame_graphs_and_pprof(analysis):
    from memsleuth.analysis import stacks
    cell = analysis.cell
    sets = {s.type: s for s in stacks.for_cell(cell)}
    s = sets["cpu_user"]
    c = analysis.view.cpu_stacks
    assert s.unit == "nanoseconds" and s.total == pytest.approx(sum(x.samples for x in c.stacks) * c.period_ns)
    gc = [fr for fr, _ in s.stacks if any(f[0] == "runtime.gcBgMarkWorker" for f in fr)]
    assert gc and all(f[3] == "runtime" for fr in gc for f in fr if f[0].startswith("runtime.gc"))
    assert all(fr[0][3] == "program" for fr, _ in s.stacks)        # the executable, outermost


def _user_stacks(*stacks: tuple[int, tuple[str, ...]], kernel: int = 0) -> CpuStacks:
    return CpuStacks(1_000_000, sum(n for n, _ in stacks) + kernel, kernel,
                     tuple(UserStack("prog", False, n, fns) for n, fns in stacks))


def test_each_allocators_own_code_is_a_part_and_memsleuths_own_wrapper_is_nobodys():
    from memsleuth.records.cpu_stacks import OWN
    s = _user_stacks((300, ("_int_malloc", "malloc", OWN + "malloc", "main")),   # glibc under the heap accounting
                (100, (OWN + "free", "main")),                               # its wrapper: memsleuth's own work
                (50, (OWN + "record_sample", OWN + "malloc", "main")),       # its own bookkeeping: nobody's
                (200, ("runtime.nextFreeFast", "runtime.mallocgc", "runtime.newobject", "main.handle")),
                (100, ("runtime.memmove", "main.copy")),                     # the runtime, not its allocator
                (250, ("pymalloc_alloc", "_PyObject_Malloc", "PyDict_New")),
                (100, ("main",)))
    parts = {(p.runtime.name if p.runtime else "malloc"): p for p in user_time.allocator_time(s)}
    # The wrapper's samples were the allocator's before: perf on programs alone read malloc's share
    # 1.2-1.6x lower than that did (sqlite3, Lua, Perl); left out, within 0.1-0.9 points.
    assert parts["malloc"].samples == 300 and parts["malloc"].wrapped == 100
    assert parts["malloc"].total == 950                     # memsleuth's own 150 left out of the whole
    assert parts["the Go runtime"].samples == 200 and parts["the Go runtime"].callers[0][0] == "main.handle"
    assert parts["CPython"].samples == 250
    names = {p.name: p.samples for p in user_time.who_ran(s)}
    assert names["the allocator (malloc and free)"] == 300 and names["the Go runtime's own allocator"] == 200
    assert names["memsleuth's own (heap accounting, call-site sampling)"] == 150
    assert sum(names.values()) == s.samples


def test_allocator_time_is_worded_by_whose_allocator_and_tried_only_where_malloc_is():
    from memsleuth.analysis.findings import allocator_time
    from memsleuth.analysis.view import CellView
    from memsleuth.records.evidence import Sample
    doc = {"status": "ok", "wall_ns": 2 * 10**9, "user_ns": 19 * 10**8, "sys_ns": 10**8, "minflt": 1000}
    s = _user_stacks((600, ("mallocgcTiny", "runtime.mallocgc", "main.handle")),
                (500, ("runtime.mallocgcTiny", "runtime.mallocgc", "main.handle")),
                (400, ("_int_free", "free", "main")), (1000, ("main.work",)))
    explain = Sample.from_msrun(doc)
    object.__setattr__(explain, "cpu_stacks", s)
    found = {f.who: f for f in allocator_time.check(CellView("c", "glibc", [Sample.from_msrun(doc)],
                                                               explain=[explain]))}
    go, malloc = found["runtime"], found["allocator"]
    assert "the Go runtime's own allocator" in go.title and "sync.Pool" in go.advice and "mimalloc" not in go.advice
    assert "malloc and free" in malloc.title and "mimalloc" in malloc.advice
    # shares of the user-mode samples, of the measured runs' user time (95% of their CPU time)
    assert go.cost_share == pytest.approx(500 / 2500 * 0.95) and malloc.cost_share == pytest.approx(400 / 2500 * 0.95)
    candidates = tries.for_findings([go, malloc], "glibc", ["mimalloc", "jemalloc"])
    assert {t.allocator for t in candidates} == {"mimalloc", "jemalloc"}
    assert all(t.finding == "allocator-time" for t in candidates)
    assert tries.for_findings([go], "glibc", ["mimalloc"]) == []


def test_a_runtime_allocators_time_spent_clearing_large_objects_is_worded_as_that():
    """Go clears a large object in full when it allocates it (runtime.memclrNoHeapPointers under
    mallocgcLarge): a 48 MiB buffer per request spent 61% of its CPU time there (perf). Worded as
    clearing new objects, with reuse of the buffer as the change; a few small objects stay as they were."""
    from memsleuth.analysis.findings import allocator_time
    from memsleuth.analysis.view import CellView
    from memsleuth.records.evidence import Sample
    doc = {"status": "ok", "wall_ns": 2 * 10**9, "user_ns": 19 * 10**8, "sys_ns": 10**8, "minflt": 1000}

    def found(*stacks):
        explain = Sample.from_msrun(doc)
        object.__setattr__(explain, "cpu_stacks", _user_stacks(*stacks, (1000, ("main.work",))))
        (f,) = allocator_time.check(CellView("c", "glibc", [Sample.from_msrun(doc)], explain=[explain]))
        return f

    big = found((900, ("runtime.memclrNoHeapPointers", "runtime.mallocgcLarge", "runtime.mallocgc", "main.handle")),
                (100, ("runtime.nextFreeFast", "runtime.mallocgc", "main.handle")))
    assert "clearing new objects" in big.title and "clears the memory" in big.mechanism
    assert "90% of these samples were clearing the memory" in " ".join(big.evidence) and "reuse them" in big.advice
    small = found((300, ("runtime.memclrNoHeapPointers", "runtime.mallocgcSmallNoscan", "main.handle")),
                  (700, ("runtime.nextFreeFast", "runtime.mallocgc", "main.handle")))
    assert "clearing" not in small.title and "sync.Pool" in small.advice
    # the JVM clears a new array with libc's memset under its allocator (perf: 72% of a program making a
    # 24 MiB array per request): the JVM's allocator, not the program's own code
    jvm = found((900, ("__memset_avx2_unaligned_erms", "MemAllocator::allocate() const",
                       "TypeArrayKlass::allocate_common(int, bool, JavaThread*)",
                       "OptoRuntime::new_array_C(Klass*, int, JavaThread*)", "[anon]")),
                (100, ("MemAllocator::allocate_inside_tlab_slow(MemAllocator::Allocation&) const",
                       "MemAllocator::allocate() const", "[anon]")))
    assert jvm.title.startswith("Time in the JVM's own allocator clearing new objects") and "reuse them" in jvm.advice
    assert not any(e.startswith("called from") for e in jvm.evidence), jvm.evidence      # memset is not its caller
    # CPython 3.13, bytes(4 MiB) per request: calloc's memset (perf: 95%), reached by tail calls from
    # PyMem_RawCalloc (put back by the call before the leaf's return address): CPython's allocator clearing
    py = found((900, ("__memset_avx2_unaligned_erms", "PyMem_RawCalloc", "_PyBytes_FromSize", "bytes_new_impl")),
               (100, ("_PyEval_EvalFrameDefault",)))
    assert py.title.startswith("Time in CPython's own allocator clearing new objects") and "bytearray" in py.advice
    # bytearray(n) clears its buffer in its own code: that memset is the interpreter's, not its allocator's
    assert user_time.allocator_time(_user_stacks((900, ("__memset_avx2_unaligned_erms", "bytearray___init__")),
                                                 (100, ("_PyEval_EvalFrameDefault",)))) == []


def test_a_zeroed_allocation_cleared_by_the_allocator_is_its_time_worded_as_clearing():
    """A Rust program with mimalloc as its global allocator makes vec![0u8; 48 MiB] per request: memset
    under _mi_malloc_generic took 86% of the CPU time (perf), and check said "No memory mechanism"."""
    from memsleuth.analysis.findings import allocator_time
    from memsleuth.analysis.view import CellView
    from memsleuth.records.evidence import Sample
    doc = {"status": "ok", "wall_ns": 2 * 10**9, "user_ns": 19 * 10**8, "sys_ns": 10**8, "minflt": 1000}
    s = _user_stacks((860, ("__memset_avx2_unaligned_erms", "_mi_malloc_generic",
                            "mi_theap_malloc_zero_aligned_at_overalloc",
                            "<mimalloc::MiMalloc as core::alloc::global::GlobalAlloc>::alloc_zeroed", "rmi::main")),
                     (140, ("rmi::main",)))
    explain = Sample.from_msrun(doc)
    object.__setattr__(explain, "cpu_stacks", s)
    (f,) = allocator_time.check(CellView("c", "glibc", [Sample.from_msrun(doc)], explain=[explain]))
    assert f.title.startswith("Time in the allocator clearing zeroed allocations") and f.who == "allocator"
    assert f.cost_share == pytest.approx(0.86 * 0.95) and "called from: rmi::main 100%" in f.evidence
    assert "Vec::with_capacity" in f.advice and "measure mimalloc, jemalloc, tcmalloc" in f.advice
    names = {p.name: p.samples for p in user_time.who_ran(s)}
    assert names["the allocator (malloc and free)"] == 860
    # memset called by the program itself is the program's
    s2 = _user_stacks((500, ("__memset_avx2_unaligned_erms", "main")), (500, ("main",)))
    assert user_time.allocator_time(s2) == []


def test_a_block_realloc_moves_is_the_allocators_time_worded_as_copying():
    """Two buffers grown side by side by 4 KiB reallocs: glibc's _int_realloc copies each into a new
    block; its memcpy (put back under _int_realloc by the leaf's return address) was 80% of the samples,
    read as the program's own code before."""
    from memsleuth.analysis.findings import allocator_time
    from memsleuth.analysis.view import CellView
    from memsleuth.records.evidence import Sample
    doc = {"status": "ok", "wall_ns": 10**9, "user_ns": 10**9, "sys_ns": 0, "minflt": 100}
    s = _user_stacks((800, ("__memcpy_avx_unaligned_erms", "_int_realloc", "__libc_realloc", "main")),
                     (150, ("_int_malloc", "__libc_realloc", "main")), (50, ("main",)))
    explain = Sample.from_msrun(doc)
    object.__setattr__(explain, "cpu_stacks", s)
    (f,) = allocator_time.check(CellView("c", "glibc", [Sample.from_msrun(doc)], explain=[explain]))
    assert f.title.startswith("Time in the allocator copying blocks that realloc moves") and f.who == "allocator"
    assert f.cost_share == pytest.approx(0.95) and "geometrically" in f.advice
    assert any(e.startswith("84% of these samples were copying") for e in f.evidence), f.evidence
    assert {p.name: p.samples for p in user_time.who_ran(s)}["the allocator (malloc and free)"] == 950
    # the program's own memcpy stays the program's
    assert user_time.allocator_time(_user_stacks((500, ("__memcpy_avx_unaligned_erms", "main")),
                                                 (500, ("main",)))) == []


def test_a_runtime_growing_goroutine_stacks_is_its_own_part_and_finding():
    """A goroutine per request recursing 2,000 calls deep: perf read 90% of the CPU time under
    runtime.newstack (copystack, and the unwinder adjusting every frame), and memsleuth called it the
    program's own work with no finding. As Go's symbols name the frames (morestack's ABI suffix too)."""
    from memsleuth.analysis.findings import stack_growth
    from memsleuth.records.evidence import Sample
    from memsleuth.analysis.view import CellView
    grow = ("runtime.pcvalue", "runtime.(*stkframe).getStackMap", "runtime.adjustframe", "runtime.copystack",
            "runtime.newstack", "runtime.morestack.abi0", "main.depth", "main.main.func1")
    shrink = ("runtime.memmove", "runtime.copystack", "runtime.shrinkstack", "runtime.scanstack",
              "runtime.markroot", "runtime.gcDrain", "runtime.gcBgMarkWorker")     # the collector's, not growth
    # newstack handing a goroutine asked to yield to the scheduler is no growth (the program's part here)
    preempted = ("runtime.findRunnable", "runtime.schedule", "runtime.goschedImpl", "runtime.gopreempt_m",
                 "runtime.newstack", "runtime.morestack.abi0", "main.depth")
    s = _stacks((False, 800, grow), (False, 60, shrink), (False, 70, ("main.depth",)), (False, 30, preempted),
                (True, 40, ("main.depth",)))
    (g,) = user_time.stack_growth(s)
    assert g.runtime.name == "the Go runtime" and g.samples == 800 and g.share == pytest.approx(0.8)
    assert g.callers == (("main.depth", 800),) and g.functions[0] == ("runtime.pcvalue", 800)
    parts = {p.name: p.samples for p in user_time.who_ran(s)}
    assert parts == {"the Go runtime growing goroutine stacks": 800, "the Go runtime's garbage collector": 60,
                     "the program and its libraries": 100, "the kernel": 40}
    assert user_time.allocator_time(_stacks((False, 500, ("runtime.mallocgc",) + grow[3:]),
                                            (False, 500, ("main",)))) == []     # its stackalloc is no allocation
    doc = {"status": "ok", "wall_ns": 10 ** 9, "user_ns": 9 * 10 ** 8, "sys_ns": 10 ** 8, "minflt": 100,
           "maxrss_kb": 10_000, "counters": {}, "syscalls": {}, "unsupported": {}, "probe": []}

    def view(stacks: CpuStacks) -> CellView:      # a measured run, and the explaining run with the samples
        return CellView("c", "glibc", [Sample.from_msrun(doc)],
                        explain=[Sample.from_msrun({**doc, "cpu_stacks": stacks.to_dict()})])
    (f,) = stack_growth.check(view(s))
    # 800 of the 960 user-mode samples, of the measured runs' 900 ms of user time
    assert f.id == "stack-growth" and f.who == "runtime" and f.cost_share == pytest.approx(0.75)
    assert f.title.startswith("the Go runtime growing goroutine stacks: 750 ms = 75% of the CPU time")
    assert "pool of workers" in f.advice and "allocator" not in f.advice
    assert "the stacks grew under main.depth (100%)" in f.evidence
    # a program that calls no deeper than its first stack holds: nothing
    assert stack_growth.check(view(_stacks((False, 1000, ("main.depth",))))) == []


def test_cpythons_inline_reference_counting_names_it_the_runtime():
    """A fork pool reading its parent's tuples (tests/e2e/runtimes/forkscan.py), its user chains as the
    explaining run gave them here: Py_INCREF and Py_DECREF, inlined and named, innermost in 26% of the
    samples, the chains cut after the next frame. Without them CPython held 49-53% of the samples against
    the 50% runtime_running needs, and the copy-on-write finding lost CPython's gc.freeze() advice in CI."""
    unknown = "[an unknown object]"
    s = _stacks((False, 490, ("Py_INCREF", "listiter_next", unknown)),
                (False, 110, ("Py_DECREF", "Py_XDECREF", "tupledealloc", unknown)),
                (False, 520, ("_PyEval_EvalFrameDefault", "PyEval_EvalCode")),
                (False, 120, ("listiter_next", unknown)), (True, 400, ("do_wp_page",)),
                (False, 100, ("syscall",)), (False, 400, ("x_add", unknown)))
    rt = user_time.runtime_running(s)
    assert rt is not None and rt.name == "CPython"
