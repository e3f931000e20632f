"""The managed runtimes whose own code can be a mechanism's culprit, and the knobs that change it:
one table. A runtime is recognised from the frames its calls come from (the call sites' own
names, records/sites.py), never from the program's name. Where the runtime manages its memory itself (it
does not take it from malloc), neither another allocator nor glibc's tunables can change its
calls, and no advice says they can.
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Runtime:
    name: str                  # as a finding words it: "the Go runtime"
    frames: re.Pattern         # a call site's function that is the runtime's own code
    own_memory: bool           # its heap is its own (mmap/madvise), not malloc's
    release: str               # what makes it give memory back less eagerly (purging, unmapping, trimming)
    churn: str                 # what makes it allocate and fault in fresh memory less often
    # its futex calls are its own threads parking (a scheduler, a collector's workers, a thread pool
    # waiting for work), not user locks
    contention_is_runtime: bool = False
    # Its own locks that are real contention (a global interpreter lock handed between threads): the
    # advice for futex calls its own code makes, where no allocator or tunable applies.
    contention: str = ""
    # The release knob as environment `check --try` can measure (name, variables); None: a flag or
    # a change to the program, not an environment setting.
    try_release: tuple[str, tuple[tuple[str, str], ...]] | None = None
    # The runtime's own objects, as a call site names them when it has no line information
    # ('f (libjvm.so, no line information)'): its frames whatever their function.
    objects: re.Pattern | None = None
    # Its garbage collector: a CPU sample's user chain with one of these frames is the collector's
    # work (analysis/user_time.py); what makes it collect less; and that knob as environment
    # `check --try` can measure (None: a flag or a change to the program).
    gc: re.Pattern | None = None
    gc_advice: str = ""
    try_gc: tuple[str, tuple[tuple[str, str], ...]] | None = None
    # A runtime with its own heap whose code also calls malloc (native buffers): what that memory is,
    # and the change, where the sites show its calls made through malloc's free (its heap's knobs do
    # not reach malloc's blocks).
    malloc_memory: str = ""
    # Release advice that fits only where its own allocator makes the calls, not malloc's free
    # (CPython's object allocator: its arenas; a 64 MiB bytes object is malloc's whatever PYTHONMALLOC says).
    own_release: str = ""
    # Its own allocator (not malloc): a CPU sample whose innermost frames, the runtime's own, include
    # one of these is its allocator's work (analysis/user_time.allocator_time); and what makes it
    # allocate less.
    alloc: re.Pattern | None = None
    alloc_advice: str = ""
    # Where its allocator clears the memory of a new object (a sample innermost there, under its
    # allocator, is zeroing, most of a large object's cost), and what avoids it.
    zeroing: re.Pattern | None = None
    zeroing_advice: str = ""
    # Its system-call wrappers, which the program's own code calls (Go's syscall.Mmap reaches the
    # kernel through internal/runtime/syscall): a call made there is the caller's, not the runtime's.
    wrappers: re.Pattern | None = None
    # Where it grows a thread's stack by copying it to a larger one (Go's goroutines start small): a
    # user-mode sample with one of these frames in its chain, outside the collector, is that growth
    # (analysis/user_time.stack_growth); what its stacks are called, and what makes them grow less often.
    stack_growth: re.Pattern | None = None
    stacks: str = ""
    stack_advice: str = ""
    # Frames that make a chain through that path something else (Go's newstack also hands a goroutine
    # asked to yield to the scheduler, and shrinks a stack for the collector).
    not_growth: re.Pattern | None = None
    # What keeps its own work from writing the pages a forked child shares with its parent (CPython's
    # reference counts and collector write to objects the child only reads): said with copy-on-write faults
    # where its frames run most of the samples.
    after_fork: str = ""


# libc's memset, where a runtime's allocator clears a new object with it (the JVM's, CPython's calloc).
LIBC_CLEARING = re.compile(r"^(__)?mem(set|clear)\w*")

TABLE: tuple[Runtime, ...] = (
    # its packages and their subpackages (runtime/debug, internal/runtime/maps: the map implementation)
    Runtime("the Go runtime", re.compile(r"^(runtime|internal/runtime)(/[\w.-]+)*\."), True,
            release="GODEBUG=madvdontneed=0 makes it give pages back with MADV_FREE (the kernel takes them only "
                    "under memory pressure, so memory used again is not faulted in again); a program calling "
                    "debug.FreeOSMemory per job returns the whole heap each time: call it less often; GOMEMLIMIT "
                    "paces its scavenger",
            churn="reuse buffers across jobs (sync.Pool) instead of allocating per job; GOGC above 100 collects "
                  "less often, so freed memory is reused rather than returned and faulted in again",
            contention_is_runtime=True, try_release=("GODEBUG=madvdontneed=0", (("GODEBUG", "madvdontneed=0"),)),
            gc=re.compile(r"^runtime\.(gcBgMarkWorker|gcDrain\w*|gcAssistAlloc\w*|markroot\w*|scan[oO]bject\w*|scanSpan|"
                          r"scanblock|scanstack|greyobject|bgsweep|sweepone|gcMarkDone|gcMarkTermination|gcStart|GC|"
                          r"wbBufFlush\w*|gcWriteBarrier\w*|bulkBarrierPreWrite|gcBgMarkStartWorkers\w*)$|"
                          r"^internal/runtime/gc/"),
            gc_advice="GOGC above 100 (or off, with GOMEMLIMIT as the bound) collects less often: each cycle scans the "
                      "whole live heap, so fewer cycles cost less, for more memory; fewer pointers in the live heap "
                      "(slices of values, not of pointers) make each scan cheaper",
            try_gc=("GOGC=200", (("GOGC", "200"),)),
            wrappers=re.compile(r"^(syscall|internal/runtime/syscall|runtime/internal/syscall|golang\.org/x/sys/unix)"
                                r"(/[\w.-]+)*\."),
            alloc=re.compile(r"^runtime\.(mallocgc\w*|newobject|newarray|makeslice\w*|growslice|rawstring\w*|"
                             r"rawbyteslice|rawruneslice|nextFreeFast|heapSetType\w*|\(\*mcache\)\.\w+|"
                             r"\(\*mcentral\)\.\w+|\(\*mspan\)\.(writeHeapBits\w*|nextFreeIndex|initHeapBits|"
                             r"refillAllocCache))$"),
            alloc_advice="allocate less per request: preallocate slices and maps to their final size (make with a "
                         "capacity), reuse objects across requests (sync.Pool), keep values rather than pointers in "
                         "hot structures; every allocation is also work for the collector",
            zeroing=re.compile(r"^runtime\.memclrNoHeapPointers\w*$"),
            zeroing_advice="keep the large buffers across requests and reuse them (one per worker, or a sync.Pool) "
                           "instead of making a new one per request, and make only the size a request uses: each "
                           "large object is cleared in full when it is allocated, and its fresh pages faulted in",
            # morestack calls newstack, which copies the stack (copystack) and adjusts every frame's pointers
            stack_growth=re.compile(r"^runtime\.(morestack[\w.]*|newstack|copystack)$"),
            stacks="goroutine stacks",
            not_growth=re.compile(r"^runtime\.(gopreempt_m|preemptPark|goschedImpl|schedule|shrinkstack)$"),
            stack_advice="run the work on long-lived goroutines (a fixed pool of workers fed by a channel) instead of a "
                         "new goroutine per request: a goroutine keeps the stack it grew for its next job (the "
                         "collector shrinks only a stack it finds mostly unused), while a new one starts small and "
                         "copies its stack again at each doubling; or make the deep call path shallower (a loop "
                         "instead of recursion, smaller frames: large arrays on the heap, not in locals); where "
                         "long-lived goroutines grow again after the collector shrank their stacks, "
                         "GODEBUG=gcshrinkstackoff=1 keeps them"),
    Runtime("the JVM", re.compile(r"^(JVM_|os::|G1|ParallelScavengeHeap|CollectedHeap|ZPage|Universe::|Java_)"), True,
            release="-Xms equal to -Xmx keeps the heap from being uncommitted after a collection and committed "
                    "(faulted in) again",
            churn="-XX:+AlwaysPreTouch faults the whole heap once at start instead of as it grows; a larger young "
                  "generation (-Xmn) collects less often",
            contention_is_runtime=True, objects=re.compile(r"\((libjvm\.so|libjli\.so)[,)]"),
            malloc_memory="these blocks are malloc's, not the Java heap's: direct ByteBuffers (allocateDirect) and "
                          "the JVM's other native memory come from malloc and go back through free, so the heap's "
                          "sizing does not reach them; keep and reuse direct buffers (a pool) instead of allocating "
                          "one per request",
            # _JAVA_OPTIONS is read after the command line's options, so it holds whatever they say
            # {max_heap}: the command's -Xmx, else the JVM's default (tries.max_heap)
            try_release=("-Xms as -Xmx", (("_JAVA_OPTIONS", "-Xms{max_heap}"),)),
            # its allocation paths: the allocators (a TLAB's refill, an array's or instance's), what compiled
            # code, C1, C2 and the interpreter call for `new`, and the heap's own allocation (G1's humongous
            # objects: regions of their own)
            alloc=re.compile(r"^(MemAllocator::|ObjAllocator::|ObjArrayAllocator::|TypeArrayKlass::allocate|"
                             r"ObjArrayKlass::allocate|InstanceKlass::allocate_instance|OptoRuntime::new_|"
                             r"Runtime1::new_|InterpreterRuntime::(_new|newarray|anewarray|multianewarray)\b|"
                             r"\w*CollectedHeap::(array_allocate|obj_allocate|allocate_new_tlab|mem_allocate|"
                             r"attempt_allocation|humongous_obj_allocate))"),
            alloc_advice="allocate fewer and smaller objects per request: reuse arrays and buffers across requests, "
                         "size collections once; every allocation is also work for the collector",
            # it clears each new object (MemAllocator's mem_clear: a memset of the whole array)
            zeroing=LIBC_CLEARING,
            zeroing_advice="keep the large arrays across requests and reuse them (one per thread, or a pool) instead "
                           "of allocating one per request, and allocate only the size a request uses: the JVM clears "
                           "each new array in full, and its fresh pages are faulted in",
            gc=re.compile(r"^(?!\w*CollectedHeap::(attempt_allocation|allocate|mem_allocate|humongous_obj_allocate))"
                          r"(G1\w*|PS\w*|ParallelCompact\w*|Shenandoah\w*|ZMark\w*|ZRelocate\w*|ZHeap\w*|XMark\w*|"
                          r"SerialHeap|DefNewGeneration|TenuredGeneration|MarkSweep|GenMarkSweep|GenCollectedHeap|"
                          r"CardTable\w*|OopOopIterate\w*|VM_G1\w*|VM_Parallel\w*|VM_GenCollect\w*|GCTaskThread|"
                          r"ConcurrentGCThread)::"),
            gc_advice="a larger heap (-Xmx) and young generation (-Xmn) collect less often; -Xlog:gc shows how often "
                      "and why it collects; fewer and smaller long-lived objects make each collection cheaper"),
    Runtime("V8 (Node.js)", re.compile(r"^(v8::|node::|Builtins_|uv_)"), False,
            release="large ArrayBuffers come from calloc and go back through free: keep and reuse them (a pool of "
                    "Buffers) instead of allocating one per request",
            churn="--max-semi-space-size=<MiB> (a larger young generation collects less often); reuse Buffers "
                  "across requests",
            objects=re.compile(r"\((node|nodejs|libnode\.so[\d.]*)[,)]"),
            # its parallel scavengers, platform workers and libuv's pool wait for work on futexes;
            # JavaScript itself has no locks
            contention_is_runtime=True,
            gc=re.compile(r"(^|\s)v8::internal::(Scavenger\w*|ScavengerCollector|MarkCompactCollector|MinorMarkCompactCollector|"
                          r"MinorMarkSweepCollector|ConcurrentMarking|IncrementalMarking|Sweeper|\w*MarkingVisitor\w*|"
                          r"MarkingWorklists\w*|ArrayBufferSweeper|Heap::(CollectGarbage|PerformGarbageCollection|"
                          r"Scavenge|MarkCompact|MinorMarkCompact|MinorMarkSweep|IterateRoots)\w*)"),
            gc_advice="--max-semi-space-size=<MiB> (a larger young generation: fewer scavenges, and fewer objects "
                      "promoted to the old one); allocate fewer short-lived objects per request",
            try_gc=("--max-semi-space-size=64", (("NODE_OPTIONS", "--max-semi-space-size=64"),))),
    # Py_INCREF, Py_DECREF, Py_XDECREF: 3.11+'s inline reference counting, named where the symbolizer
    # reads it inlined (a fork pool reading its parent's tuples: 26% of its samples innermost there,
    # and CPython found in 49-53% of them against the 50% runtime_running needs, without them)
    Runtime("CPython", re.compile(r"^(_Py|Py[A-Z_]|pymalloc|_PyObject|list_|dict_|array_|PyArray|npy_)"), False,
            own_release="PYTHONMALLOC=malloc puts small objects on malloc too, where an allocator's options apply",
            contention="these are CPython's own locks: the GIL handed between its threads (one thread runs Python "
                       "code at a time; take_gil and drop_gil wait and wake on futexes) and its threading locks and "
                       "queues; fewer threads running Python code at once (the work in processes, or in native code "
                       "that releases the GIL) hand it over less often; no allocator or allocator setting changes them",
            release="large buffers (bytearray, array, bytes) come from malloc: reuse one across steps instead of "
                    "a new one per step",
            churn="reuse buffers across steps instead of creating a temporary per step",
            # the interpreter's own code where its static functions have no symbol (Debian's python3.x)
            objects=re.compile(r"(\(|^an address in )(python3(\.\d+)?|libpython3[\d.]*\.so[\d.]*)[ ,)]"),
            gc=re.compile(r"^(gc_collect_main|gc_collect_with_callback|gc_collect_generations|gc_collect_region|"
                          r"gc_collect_impl|_PyGC_Collect|PyGC_Collect|visit_decref|visit_reachable|subtract_refs|"
                          r"update_refs|move_unreachable|deduce_unreachable|finalize_garbage|delete_garbage|"
                          r"untrack_tuples|untrack_dicts|gc_list_\w+|move_legacy_finalizer\w*|handle_weakrefs|"
                          r"clear_unreachable_mask|invoke_gc_callback)$"),
            after_fork="in CPython even reading an object writes its reference count, and the collector writes to "
                       "every object it traverses: gc.freeze() just before fork moves the parent's objects out of the "
                       "collector's reach, and data kept in bytes, arrays or numpy arrays (one object, not one per "
                       "item) is read without writes",
            gc_advice="gc.freeze() after start-up moves the objects built so far out of the collector's reach; "
                      "gc.set_threshold() with a larger first threshold collects less often; fewer container "
                      "objects (tuples of numbers in an array, not lists of objects) give it less to traverse",
            # obmalloc's entry points and the helpers the symbolizer names where they are inlined
            alloc=re.compile(r"^(_?PyObject_(Malloc|Calloc|Realloc|Free)|_?PyMem_\w+|pymalloc_\w+|"
                             r"allocate_from_new_pool|insert_to_usedpool|insert_to_freepool|arena_map_\w+|"
                             r"address_in_range|has_own_state|_PyObject_GC_(New|NewVar|Alloc|Del|Link)\w*|gc_alloc|"
                             r"new_arena)$"),
            alloc_advice="create fewer objects per step: reuse containers, classes with __slots__, numbers in an "
                         "array (array, numpy) rather than a list of objects",
            # a zeroed object (bytes(n), PyObject_Calloc) is cleared by libc's memset (calloc's, for a large one)
            zeroing=LIBC_CLEARING,
            zeroing_advice="keep one buffer across requests and reuse it (a bytearray, filled in place through a "
                           "memoryview or readinto) instead of a new zeroed bytes or bytearray per request: each is "
                           "cleared in full when it is made"),
)

# Advice that fits only where a library's own frames make the calls (a word about numpy's out= is
# no help to a program that grows a bytearray): appended where the sites show that library.
LIBRARY_ADVICE: tuple[tuple[re.Pattern, str], ...] = (
    (re.compile(r"^(PyArray|npy_|array_)|numpy"), "numpy's arrays: out= arguments and in-place operators reuse an "
                                                  "array instead of a temporary per step"),
)


def library_advice(sites: list) -> list[str]:
    """The LIBRARY_ADVICE whose library's frames are among these call sites ([(site text, share)])."""
    return [advice for frames, advice in LIBRARY_ADVICE
            if any(frames.search(function_of(str(text))) or frames.search(str(text)) for text, _ in sites)]


# A mechanism is the runtime's when at least this share of its sampled call sites are its frames.
MIN_SHARE = 0.8
# The findings a runtime's release knobs address (memory given back too eagerly), and those its
# churn knobs address (fresh memory allocated and faulted in per use); any other finding keeps its
# own advice (a madvise hint or prefault is neither).
RELEASE_FINDINGS = ("madvise-storm", "mmap-churn", "heap-trim-churn")
CHURN_FINDINGS = ("first-touch", "mremap-churn")


def advice_for(rt: Runtime, finding: str, via_malloc: bool = False) -> str | None:
    """A runtime's own advice for a finding's mechanism, or None where it has none to give;
    `via_malloc`: the call sites show the calls made through malloc's free, not its own allocator."""
    if finding == "lock-contention":
        return rt.contention or None
    if finding in RELEASE_FINDINGS:
        if via_malloc and rt.own_memory:     # malloc's blocks, not its heap's: its heap's knobs do not apply
            return rt.malloc_memory or None
        return "; ".join(a for a in ("" if via_malloc else rt.own_release, rt.release) if a)
    if finding in CHURN_FINDINGS:
        # a runtime with its own heap faults in again what it gave back (a heap that shrinks after each
        # collection and grows again): its release knob is advice for these faults too
        return f"{rt.churn}; {rt.release}" if rt.own_memory else rt.churn
    return None


def function_of(site: str) -> str:
    """The function of a call site as sites.py words it: 'name (file:line)' or 'name (object, ...)'."""
    return site.split(" (", 1)[0].strip()


def runtime_of(sites: list) -> tuple[Runtime, float] | None:
    """The runtime whose frames make at least MIN_SHARE of these call sites ([(site text, share)]), and
    that share; None when no runtime does. A call made in its system-call wrappers is the caller's."""
    for rt in TABLE:
        share = sum(float(s) for text, s in sites
                    if not (rt.wrappers is not None and rt.wrappers.search(function_of(str(text))))
                    and (rt.frames.search(function_of(str(text)))
                         or (rt.objects is not None and rt.objects.search(str(text)))))
        if share >= MIN_SHARE:
            return rt, share
    return None


def by_name(name: str | None) -> Runtime | None:
    return next((rt for rt in TABLE if rt.name == name), None)
