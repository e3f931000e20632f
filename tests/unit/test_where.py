"""records/sites.py reads perf script text: synthetic stacks, no perf needed."""
from __future__ import annotations

import pytest

from memsleuth.analysis import runtimes
from memsleuth.records import calls, symbols
from memsleuth.measure import perfmaps, where
from memsleuth.records import sites

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
MIMALLOC = "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2"


def F(path, function, line=None, source=None, language=None):
    return symbols.Frame(path, 0x1000, function, line, source, language)


# Two madvise stacks: one through a stripped allocator, one straight from the program.
STACKS = [("prog", "syscalls:sys_enter_madvise", [F(LIBC, "__GI_madvise", "madvise.c:10"), F(MIMALLOC, None),
                                                  F("/tmp/prog", "main", "prog.c:42", "/src/prog.c")]),
          ("prog", "syscalls:sys_enter_madvise", [F(LIBC, "__GI_madvise", "madvise.c:10"),
                                                  F("/tmp/prog", "release_block", "prog.c:7", "/src/prog.c")])]


def test_a_stripped_allocator_is_the_runtime_not_the_users_call_site():
    got = sites.summarise(STACKS, allocator=MIMALLOC)["madvise"]
    named = dict((s, share) for s, share in got["user_sites"])
    assert named == {"main (prog.c:42)": 0.5, "release_block (prog.c:7)": 0.5}
    assert got["through_allocator"] == 0.5   # one stack through the allocator's object, one straight from the program


def test_without_the_allocator_named_its_frame_would_pass_for_the_users():
    got = sites.summarise(STACKS)["madvise"]
    assert any("libmimalloc.so.2" in s for s, _ in got["user_sites"])


def test_perf_script_text_is_read_as_addresses_symbols_and_objects():
    text = ("prog 100 syscalls:sys_enter_madvise: \n\t          1234 __GI_madvise (/usr/lib/x86_64-linux-gnu/libc.so.6)\n"
            "\t          5678 [unknown] (/tmp/perf-100.map)\n\n")
    assert sites.parse(text) == [("prog", "syscalls:sys_enter_madvise",
                                  [(0x1234, "__GI_madvise", LIBC), (0x5678, "[unknown]", "/tmp/perf-100.map")])]


def test_the_site_is_the_programs_line_with_the_inlined_library_frame_that_made_the_call():
    """C++: operator new's caller is std::vector's constructor, inlined into the program's function."""
    stack = [F(LIBC, "malloc"), F("/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "operator new(unsigned long)"),
             F("/tmp/server", "std::vector<double, std::allocator<double> >::vector(unsigned long)", "stl_vector.h:511",
               "/usr/include/c++/12/bits/stl_vector.h"),
             F("/tmp/server", "scaled(std::vector<double> const&, double)", "server.cc:9", "/src/server.cc")]
    got = sites.summarise([("server", "page-faults", stack)])["page-faults"]
    assert got["user_sites"] == [["scaled (server.cc:9) via std::vector<double, std::allocator<double> >::vector "
                                  "(stl_vector.h:511)", 1.0]]
    assert got["makers"][0][0].startswith("std::vector")


def test_a_runtimes_frames_give_way_to_the_programs_language():
    node = "/usr/bin/node"
    js = symbols.language_frame("JS:*handle /srv/app/server.js:17:20")
    internal = symbols.language_frame("JS:~alloc node:buffer:391:17")
    stack = [F(LIBC, "munmap"), F(node, "v8::base::OS::Free(void*, unsigned long)"), F(node, "Builtins_CEntry"),
             symbols.Frame("[jit]", 1, *internal[1:], internal[0]), symbols.Frame("[jit]", 2, *js[1:], js[0])]
    got = sites.summarise([("node", "munmap", stack)])["munmap"]
    assert got["user_sites"][0][0] == "handle (server.js:17) via v8::base::OS::Free (node, no line information)"
    # who made the call is V8's own code, so the runtime's knobs apply (runtimes.runtime_of)
    assert runtimes.runtime_of(got["makers"])[0].name == "V8 (Node.js)"
    # without a frame of the script, the interpreter's own frames are never the program's site
    got = sites.summarise([("node", "munmap", stack[:3])])["munmap"]
    assert got["user_sites"] == [[sites.LOST, 1.0]] and sites.EventSites.from_dict(got).unwound_share == 0


def test_perf_map_names_in_each_language():
    assert symbols.language_frame("JS:*work /tmp/loop.js:3:14") == ("JavaScript", "work", "loop.js:3", "/tmp/loop.js")
    assert symbols.language_frame("LazyCompile:~ /tmp/a b.js:1:1")[1:3] == ("(anonymous)", "a b.js:1")
    assert symbols.language_frame("py::step:/srv/job/temps.py") == ("Python", "step", "temps.py", "/srv/job/temps.py")
    assert symbols.language_frame("long Buffers.handle(int)") == ("Java", "Buffers.handle", None, "Buffers")
    assert symbols.language_frame("void com.acme.Server$Worker.run()")[1] == "com.acme.Server$Worker.run"
    for runtime_own in ("Interpreter", "StubRoutines (1)", "Builtin:ArgumentsAdaptorTrampoline", "_new_array_Java",
                        "BytecodeHandler:Ldar"):
        assert symbols.language_frame(runtime_own) is None
    # a runtime's own scripts and libraries are not the program
    for lib in ("JS:~Module._compile node:internal/modules/cjs/loader:1256:14",
                "py::_find_and_load:<frozen importlib._bootstrap>", "void java.util.ArrayList.grow(int)"):
        lang = symbols.language_frame(lib)
        assert not symbols.is_program(symbols.Frame("[jit]", 0, *lang[1:], lang[0])), lib


def test_perf_maps_are_read_by_address_and_removed_only_for_the_runs_own_processes(tmp_path, monkeypatch):
    import os
    import time
    monkeypatch.setattr(symbols, "PERF_MAP_DIR", str(tmp_path))
    a, b, c = [p for p in range(4_000_000, 4_100_000) if not os.path.exists(f"/proc/{p}")][:3]   # ended processes
    live = os.getpid()                  # a running process: another's, whatever pid the run saw
    (tmp_path / f"perf-{a}.map").write_text("7f0000001000 40 JS:*handle /srv/a.js:3:1\n7f0000002000 10 Stub:CEntry\n")
    for pid in (b, c, live):
        (tmp_path / f"perf-{pid}.map").write_text("")
    old = time.time() - 3600
    os.utime(tmp_path / f"perf-{b}.map", (old, old))
    m = symbols.PerfMap(str(tmp_path / f"perf-{a}.map"))
    assert m.find(0x7f0000001000) == m.find(0x7f000000103f) == "JS:*handle /srv/a.js:3:1"
    assert m.find(0x7f0000001040) is None and m.find(0x7f0000002005) == "Stub:CEntry"
    for name in (f"isolate-0x5f3a-{a}-v8.log", f"isolate-0x5f3a-{c}-v8.log", f"isolate-0x9a-{a}-x.log"):
        (tmp_path / name).write_text("v8-version,11\n")
    gone = perfmaps.remove_left_behind([a, b, live], since=time.time() - 60, cwd=str(tmp_path))
    # b's map is older than the run; c is not the run's; the live process's is its own; a name V8 does not
    # write is not touched
    assert gone == [str(tmp_path / f"perf-{a}.map"), str(tmp_path / f"isolate-0x5f3a-{a}-v8.log")]
    assert sorted(os.listdir(tmp_path)) == sorted([f"isolate-0x5f3a-{c}-v8.log", f"isolate-0x9a-{a}-x.log",
                                                   f"perf-{b}.map", f"perf-{c}.map", f"perf-{live}.map"])


def test_a_perf_map_another_user_left_or_a_link_is_not_read(tmp_path):
    import os
    own = tmp_path / "perf-1.map"
    own.write_text("7f0000001000 40 planted\n")
    link = tmp_path / "perf-2.map"
    link.symlink_to(own)
    assert symbols.PerfMap(str(own)).find(0x7f0000001000) == "planted"      # this user's own
    assert symbols.PerfMap(str(link)).find(0x7f0000001000) is None           # a link is nobody's map
    if os.geteuid() == 0:
        os.chown(own, 65534, 65534)                                            # nobody's, for a process of root's
        assert symbols.PerfMap(str(own), pid=os.getpid()).find(0x7f0000001000) is None


def test_names_from_a_process_are_escaped_and_cut():
    f = symbols.Frame("/x/\x1b[2Jprog", 0, "f\u202e" + "a" * 2_000_000, None)
    assert "\x1b" not in f.path and "\\x1b" in f.path and "\u202e" not in f.function
    assert len(f.function) < 600 and f.function.endswith("more characters]")


def test_symbolizer_answers_are_read_with_their_inlined_frames():
    out = ["std::vector<int>::push_back(int const&)", "/usr/include/c++/12/bits/stl_vector.h:1287:4", "fill(int)",
           "/src/app.cc:12:7", "", "??", "??:0:0", ""]
    assert symbols._parse_blocks(out) == [
        [["std::vector<int>::push_back(int const&)", "/usr/include/c++/12/bits/stl_vector.h", 1287],
         ["fill(int)", "/src/app.cc", 12]],
        [[None, None, None]]]
    assert [f.text() for f in symbols.resolve_chain("/tmp/app", 5, symbols._parse_blocks(out)[0])] == [
        "std::vector<int>::push_back (stl_vector.h:1287)", "fill (app.cc:12)"]


def test_an_older_python_is_said_to_need_3_12_for_its_own_lines():
    docs = [{"maps": [[0, 1, 0, "/usr/bin/python3.11"],
                      [2, 3, 0, "/opt/memsleuth/.venv/lib/python3.11/site-packages/memsleuth/_native/libmssites.so"]]}]
    assert "3.12" in sites.language_notes(docs, [])[0]
    docs = [{"maps": [[2, 3, 0, "/opt/venv/lib/python3.11/site-packages/memsleuth/_native/libmssites.so"]]}]
    assert sites.language_notes(docs, []) == []     # memsleuth's own library's folder is not the program's Python


def test_names_lose_their_parameter_lists():
    assert symbols.short_name("scaled(std::vector<double> const&, double)") == "scaled"
    assert symbols.short_name("f() const") == "f" and symbols.short_name("main.main") == "main.main"
    assert symbols.short_name("Functor::operator()(int)") == "Functor::operator()"


def test_periods_aim_at_target_samples_whatever_the_length():
    got = where.periods({"page-faults": 4_000_000, "madvise": 120, "munmap": 0, "brk": 1})
    assert got == {"page-faults": 4_000_000 // where.TARGET_SAMPLES, "madvise": 1, "brk": 1}
    assert where.sites_spec(got) == f"page-faults={4_000_000 // where.TARGET_SAMPLES},madvise=1,brk=1"
    # node's start-up: futex and mprotect below the counts from which they can be a finding get a few
    # stacks, not 400 each; mmap (who maps memory) is sampled fully whatever its count
    got = where.periods({"futex": 442, "mprotect": 408, "mmap": 132, "page-faults": 494_360})
    assert got == {"futex": 442 // where.MINOR_SAMPLES, "mprotect": 408 // where.MINOR_SAMPLES, "mmap": 1,
                   "page-faults": 494_360 // where.TARGET_SAMPLES}
    assert where.periods({"futex": 5000, "mprotect": 4000})["mprotect"] == 4000 // where.TARGET_SAMPLES


def test_futex_calls_below_lock_contentions_rate_get_a_few_stacks():
    """node, 2.3 s: 1,100 futex calls (over the count floor, 480 a second, under the rate's): every
    second call sampled made it 0.28 s slower; lock-contention cannot speak of them."""
    from memsleuth.analysis.findings import lock_contention
    assert where.SITE_RATE_FLOORS["futex"] == lock_contention.FUTEX_PER_S
    assert where.periods({"futex": 1100}, wall_s=2.3) == {"futex": 1100 // where.MINOR_SAMPLES}
    assert where.periods({"futex": 1100}, wall_s=0.9) == {"futex": 1100 // where.TARGET_SAMPLES}
    assert where.periods({"futex": 1100}) == {"futex": 1100 // where.TARGET_SAMPLES}     # no wall time: the count
    assert where.periods({"page-faults": 100_000}, wall_s=1000.0) == {"page-faults": 100_000 // where.TARGET_SAMPLES}


def test_a_storms_arguments_are_sampled_with_a_prime_period_never_below_the_minimum():
    from memsleuth.measure import runner
    assert runner.args_every({"madvise": runner.ARGS_RECORDS}) == {}            # every call up to the target
    got = runner.args_every({"madvise": 40_000, "munmap": 50 * runner.ARGS_RECORDS, "brk": 10**7})
    assert got["madvise"] == runner.MIN_ARGS_EVERY                            # 2 would alias a 2-call pattern
    assert got["munmap"] == 53                                                 # the first prime >= 50
    assert "brk" not in got                                                    # its moves are read in order


def test_a_run_of_many_faults_traces_them_in_a_share_of_its_ticks_and_samples_those(monkeypatch):
    """Each traced fault costs its thread the tracepoint, recorded or not: beyond FAULT_TRACED faults
    they are traced in a share of the ticks (about FAULT_TRACED of them), one in P of those recorded."""
    from memsleuth.measure import runner, launcher
    from memsleuth.measure.plan import Cell
    from memsleuth.measure import allocators, native
    monkeypatch.setattr(native, "ms_run", lambda: "ms-run")     # the argv only: nothing is run
    few = {"page-faults": runner.FAULT_TRACED}
    assert runner.fault_share(few) is None and runner.args_every(few)["faults"] == 29   # 25 -> prime
    many = {"page-faults": 4 * runner.FAULT_TRACED}
    assert runner.fault_share(many) == 0.25
    assert runner.args_every(many)["faults"] == runner.args_every(few)["faults"]       # as many records
    assert runner.fault_share({"page-faults": 0}) is None
    cell = Cell(allocators.glibc(), {}, ("prog",))
    argv = launcher.msrun_argv(cell, "out", timeout_s=None, mem_limit_bytes=None, syscall_args=True,
                               args_every={"faults": 29}, fault_share=0.25)
    assert argv[argv.index("--fault-share") + 1] == "0.25"
    assert "--fault-share" not in launcher.msrun_argv(cell, "out", timeout_s=None, mem_limit_bytes=None,
                                                      syscall_args=True, args_every={"faults": 29})
    # the in-program sampler's faults switched in the same ticks, where it samples them
    monkeypatch.setattr(where, "library", lambda: "libmssites.so")

    def switch(**kw) -> list[str]:
        a = launcher.msrun_argv(cell, "out", timeout_s=None, mem_limit_bytes=None, sites_dir="d", **kw)
        return [x for x in a if x.startswith("MEMSLEUTH_SITES_SWITCH=")]
    assert switch(syscall_args=True, sites={"page-faults": 40}, fault_share=0.25) == ["MEMSLEUTH_SITES_SWITCH=0.25"]
    assert switch(syscall_args=True, sites={"page-faults": 40}) == []
    assert switch(syscall_args=True, sites={"munmap": 1}, fault_share=0.25) == []
    assert switch(syscall_args=False, sites={"page-faults": 40}, fault_share=0.25) == []
    # an attached window: from the fault rate before it, about ATTACH_FAULTS_TRACED_S traced a second
    storm = launcher.attach_argv([1], "out", "dir", 5, 6 * launcher.ATTACH_FAULTS_TRACED_S)
    assert float(storm[storm.index("--fault-share") + 1]) == pytest.approx(1 / 6, abs=1e-3)
    assert "--fault-share" not in launcher.attach_argv([1], "out", "dir", 5, 1000.0)
    assert "--fault-share" not in launcher.attach_argv([1], "out", "dir", 5, None)
    # beside perf record, which samples the faults' call sites, ms-run's kernel sampler leaves them to it

    def spec(argv):
        return argv[argv.index("--outside-sites") + 1]
    assert "page-faults" in spec(launcher.attach_argv([1], "out", "dir", 5, None))
    alongside = spec(launcher.attach_argv([1], "out", "dir", 5, None, perf_records=True))
    assert "page-faults" not in alongside and "munmap" in alongside


def test_the_sampler_runs_from_the_kernel_that_delivers_a_blocked_sigtrap_late():
    assert not where.sampler_usable("6.1.0-18-amd64")      # Debian 12's stock kernel: perf record instead
    assert where.sampler_usable("6.2.0") and where.sampler_usable("6.18.44-fc")
    assert not where.sampler_usable("5.15.0") and not where.sampler_usable("garbage")


def test_memsleuths_own_frames_are_not_a_profiles_leaf():
    """The heap accounting's interposer is the innermost frame of every allocation stack: left out, so
    pprof's flat cost and the flame graph's tips are the program's calls (malloc, then its caller)."""
    msheap = "/usr/lib/python3/dist-packages/memsleuth/_native/libmsheap.so"
    frames = [symbols.Frame(msheap, 0x10, "ms_record", None), symbols.Frame(msheap, 0x20, "malloc", None),
              symbols.Frame("/srv/app", 0x30, "handle", "app.c:9", "/srv/app.c")]
    entry = symbols.stack_entry(frames, lambda path: False)
    assert [e[0] for e in entry] == ["handle"] and entry[0][1] == "/srv/app.c"
    # a call made under malloc (brk, a page fault): the interposer sits between the program and the C
    # library, a frame the program alone does not have
    libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
    under = [symbols.Frame(libc, 0x1, "__sbrk", None), symbols.Frame(libc, 0x2, "__libc_malloc", None),
             symbols.Frame(msheap, 0x20, "malloc", None), frames[2]]
    assert [e[0] for e in symbols.stack_entry(under, lambda path: False)] == ["handle", "__libc_malloc", "__sbrk"]


def test_a_libraries_advice_is_given_only_where_its_frames_make_the_calls():
    numpy_sites = [("npy_alloc_cache (_multiarray_umath.cpython-311-x86_64-linux-gnu.so, no line information)", 0.9)]
    bytearray_sites = [("PyByteArray_Resize (python3.11, no line information)", 0.95)]
    assert "out=" in " ".join(runtimes.library_advice(numpy_sites))
    assert runtimes.library_advice(bytearray_sites) == []
    assert "numpy" not in runtimes.by_name("CPython").release


def test_answers_without_lines_are_cached_by_the_file_and_asked_again_for_another_file(tmp_path, monkeypatch):
    """Debian's node has symbols and no debug information: its answers have no line, and before they
    were never cached, so every check sent node's binary to llvm-symbolizer again (0.3 s each)."""
    import shutil
    import sys
    from memsleuth.records import symbols
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(symbols.shutil, "which", lambda name: "/bin/true" if name == "llvm-symbolizer" else None)
    asked = []

    def fake(tool, wanted, deadline):
        asked.append(list(wanted))
        return {ref: [["v8::Function", None, None]] if ref[1] == 0x10 else [["main", "/src/m.c", 7]] for ref in wanted}
    monkeypatch.setattr(symbols, "_llvm", fake)
    binary = tmp_path / "node"
    shutil.copy(sys.executable, binary)
    found, _ = symbols.symbolize({str(binary): {0x10, 0x20}})
    assert found[(str(binary), 0x10)] == [["v8::Function", None, None]] and len(asked) == 1
    found, _ = symbols.symbolize({str(binary): {0x10, 0x20}})        # both from the cache now
    assert found[(str(binary), 0x10)] == [["v8::Function", None, None]] and len(asked) == 1
    # another file with the same build id (its unstripped build, say): the lines are shared, the rest asked again
    other = tmp_path / "node-debug"
    shutil.copy(sys.executable, other)
    symbols.symbolize({str(other): {0x10, 0x20}})
    assert asked[-1] == [(str(other), 0x10)], asked


def test_stacks_left_out_under_a_blocked_signal_are_said_only_where_they_are_many(tmp_path):
    """The sampler leaves out a stack taken while the program blocked its signal; a few of thousands
    change no share, so the first screen does not say so (it did for 1 of 2,000)."""
    import json

    def notes(late):
        doc = {"comm": "srv", "events": [{"name": "munmap", "opened": True, "period": 1}],
               "stacks": [[0, 1000, []]], "async": late}
        (tmp_path / "sites.jsonl").write_text("\n" + json.dumps(doc) + "\n")
        return " ".join(sites.read_sampled(str(tmp_path), "glibc")["notes"])

    assert "left out" not in notes(3)
    assert "50 sampled stacks left out" in notes(50)


def test_rust_legacy_names_are_written_as_rust_writes_them():
    from memsleuth.records.symbols import rust_legacy
    assert rust_legacy("_$LT$mimalloc..MiMalloc$u20$as$u20$core..alloc..global..GlobalAlloc$GT$::alloc_zeroed"
                       "::h2a41e6efc77e790d") == "<mimalloc::MiMalloc as core::alloc::global::GlobalAlloc>::alloc_zeroed"
    assert rust_legacy("std::rt::lang_start::_$u7b$$u7b$closure$u7d$$u7d$::h0123456789abcdef") == \
        "std::rt::lang_start::{{closure}}"
    assert rust_legacy("rmi::main::h0123456789abcdef") == "rmi::main"
    assert rust_legacy("operator new(unsigned long)") == "operator new(unsigned long)"     # not Rust: as it is


def test_a_frameless_libc_leaf_gets_its_caller_back_from_the_word_at_the_stack_pointer():
    # calloc -> memset under frame pointers: the chain skips calloc; ms-run kept calloc's return address.
    named = {(0, 1): (F(LIBC, "__memset_avx2_unaligned_erms"),), (0, 2): (F(LIBC, "__libc_start_call_main"),),
             (0, 9): (F(LIBC, "__libc_calloc"),), (0, 7): (F("/tmp/prog", "handle", "prog.c:7"),)}
    got = [f.function for f in calls.chain(named, 0, [1, 2], ret=9)]
    assert got == ["__memset_avx2_unaligned_erms", "__libc_calloc", "__libc_start_call_main"]
    assert [f.function for f in calls.chain(named, 0, [1, 2])] == ["__memset_avx2_unaligned_erms",
                                                                    "__libc_start_call_main"]
    # The word names the chain's next function already, or the leaf is not libc's: nothing added.
    assert [f.function for f in calls.chain(named, 0, [1, 9], ret=9)] == ["__memset_avx2_unaligned_erms",
                                                                           "__libc_calloc"]
    assert [f.function for f in calls.chain(named, 0, [7, 2], ret=9)] == ["handle", "__libc_start_call_main"]
    named[(0, 3)] = (F("/tmp/prog", "memset_fields", "prog.c:3"),)   # the program's own: it makes its frame
    assert [f.function for f in calls.chain(named, 0, [3, 2], ret=9)] == ["memset_fields", "__libc_start_call_main"]


def test_stacks_are_read_whatever_ms_run_wrote_after_their_addresses():
    from memsleuth.records import documents
    assert documents.stack_fields([0, 5, [1, 2]]) == (0, 5, [1, 2], [], 0)
    assert documents.stack_fields([1, 5, [1, 2], [0, 5]]) == (1, 5, [1, 2], [0, 5], 0)
    assert documents.stack_fields([1, 5, [1, 2], [], 99]) == (1, 5, [1, 2], [], 99)
    assert documents.stack_fields([1, 5]) is None and documents.stack_fields([1, "5", []]) is None
    assert documents.stack_addresses({"stacks": [[0, 1, [4, 5], [], 6], [0, 1, [7]], "junk"]}) == [4, 5, 6, 7]


def test_gos_frameless_copy_gets_growslice_back_as_its_caller():
    # append's growth: runtime.memmove (a frame of size 0) called by growslice, which the chain skips
    gobin = "/tmp/gg"
    named = {(0, 1): (F(gobin, "runtime.memmove"),), (0, 2): (F(gobin, "main.main"),),
             (0, 9): (F(gobin, "runtime.growslice"),)}
    assert [f.function for f in calls.chain(named, 0, [1, 2], ret=9)] == ["runtime.memmove", "runtime.growslice",
                                                                           "main.main"]
    named[(0, 4)] = (F(gobin, "runtime.scanobject"),)     # a Go function that makes its frame: as it was
    assert [f.function for f in calls.chain(named, 0, [4, 2], ret=9)] == ["runtime.scanobject", "main.main"]


def test_a_stack_whose_addresses_are_not_numbers_is_not_read():
    from memsleuth.records import documents
    assert documents.stack_fields([0, 5, [[1], 2]]) is None      # would have been an unhashable key
    assert documents.stack_addresses({"stacks": [[0, 5, ["x"]], [0, 1, [3]]]}) == [3]


def test_an_objects_functions_and_imports_are_read_as_each_entry_says():
    """_function_starting and _import_at search the tables for an address instead of reading them whole
    (node's binary: 1.2 s to read every entry and name; python3.12's relocations 40 ms); against a
    reading of each entry on its own, on the machine's libc: every function's first name at its
    address, and every relocation's bound name at its slot."""
    import os
    import struct

    import pytest
    path = os.path.realpath("/lib/x86_64-linux-gnu/libc.so.6")
    if not os.path.exists(path):
        pytest.skip("no /lib/x86_64-linux-gnu/libc.so.6 here")
    obj = calls._object(path)
    assert obj is not None
    data, sections = obj.data, obj.sections

    def entry(h, k):
        return struct.unpack_from("<IBBHQQ", data, h[4] + k * (h[9] or 24))

    def name(strtab, off):
        start = strtab[4] + off
        return data[start:data.find(b"\0", start)].decode("utf-8", "replace")
    first: dict[int, str] = {}
    for _, h in sections:
        if h[1] in (calls.SHT_SYMTAB, calls.SHT_DYNSYM):
            for k in range(h[5] // (h[9] or 24)):
                st_name, info, _, _, value, size = entry(h, k)
                if value and size and info & 0xF == calls.STT_FUNC:
                    first.setdefault(value, name(sections[h[6]][1], st_name))
    assert len(first) > 1000
    assert all(calls._function_starting(obj, a) == n for a, n in first.items())
    assert calls._function_starting(obj, 1) is None
    bound: dict[int, str] = {}
    for _, h in sections:
        if h[1] == calls.SHT_RELA and h[6] < len(sections) and sections[h[6]][1][1] == calls.SHT_DYNSYM:
            dynsym = sections[h[6]][1]
            for k in range(h[5] // (h[9] or 24)):
                r_offset, r_info = struct.unpack_from("<QQ", data, h[4] + k * (h[9] or 24))
                if r_info >> 32:
                    n = name(sections[dynsym[6]][1], entry(dynsym, r_info >> 32)[0])
                    if n:
                        bound[r_offset] = n
    assert bound and all(calls._import_at(obj, slot) == n for slot, n in bound.items())
    assert calls._import_at(obj, 1) is None


def test_a_runs_documents_are_the_lines_that_read_whole_and_a_process_own_sampler_wins(tmp_path):
    """Every process appends its document as a line of one file per kind (msj_append_line): a line
    cut short by a kill is followed by the next one's leading newline and left out alone, and where
    ms-run's kernel sampler wrote a document for a pid the in-program sampler has (a pid reused), the
    program's own is kept."""
    import json
    from memsleuth.records import documents

    own = {"pid": 7, "comm": "a", "events": [], "stacks": [[0, 3, [1, 2]]]}
    by_kernel = {"pid": 7, "comm": "b", "sampled_by": "kernel", "events": [], "stacks": [[0, 1, [5]]]}
    other = {"pid": 12, "comm": "c", "sampled_by": "kernel", "events": [], "stacks": []}
    text = "\n" + json.dumps(other) + "\n" + "\n" + json.dumps(own)[:25] + "\n" + json.dumps(by_kernel) + "\n" \
           + "\n" + json.dumps(own) + "\n" + "\n[1, 2]\n"
    (tmp_path / "sites.jsonl").write_text(text)
    assert [d["pid"] for d in documents.run_documents(str(tmp_path), "sites")] == [12, 7, 7]
    assert documents.documents_pids(str(tmp_path), "sites") == [12, 7, 7, 7]     # the cut one's too
    kept = documents.stack_documents(str(tmp_path), "sites")
    assert [(d["pid"], d["comm"]) for d in kept] == [(12, "c"), (7, "a")]
    assert documents.run_documents(str(tmp_path), "heap") == []
    (tmp_path / "cpu.jsonl").write_text(json.dumps({**own, "pid": [7]}) + "\n" + json.dumps(by_kernel) + "\n")
    assert [d["comm"] for d in documents.stack_documents(str(tmp_path), "cpu")] == ["b", "a"]   # a foreign pid


def test_an_allocator_compiled_into_the_program_is_named_and_its_settings_advised():
    """A Rust program on the mimalloc crate: its madvise calls come from _mi_prim_decommit in its own
    binary. They read "the program itself makes these calls ... tuning or replacing the allocator will
    not remove them", where mimalloc's own settings reach them (and a preload does not replace it)."""
    from memsleuth.analysis.findings.base import Finding
    from memsleuth.analysis.summary import with_call_sites
    prog = "/srv/rmi/target/release/rmi"
    stack = [F(LIBC, "__GI_madvise", "madvise.c:10"), F(prog, "_mi_prim_decommit"), F(prog, "_mi_os_decommit"),
             F(prog, "rmi::main", "main.rs:9", "/srv/rmi/src/main.rs")]
    got = sites.summarise([("rmi", "syscalls:sys_enter_madvise", stack, 10)])["madvise"]
    assert got["built_in"] == [["mimalloc (rmi)", 1.0]], got["built_in"]
    storm = Finding(id="madvise-storm", title="Madvise storm", mechanism="m", evidence=[], advice="a", confidence="low",
                    calls="madvise")
    where = sites.CallSites.from_dict({"events": {"madvise": got}})
    (f,) = with_call_sites([storm], where)
    assert f.who == "allocator" and f.advice.startswith("mimalloc is compiled into the program"), (f.who, f.advice)
    assert "MIMALLOC_PURGE_DELAY" in f.advice and "straight from the program" not in " ".join(f.evidence)
    # a program function that only shares a prefix's letters is not an allocator's
    plain = [F(LIBC, "__GI_madvise"), F(prog, "semi_join"), F(prog, "main")]
    assert sites.summarise([("p", "syscalls:sys_enter_madvise", plain, 1)])["madvise"]["built_in"] == []
