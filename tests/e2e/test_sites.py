"""Issue 24: one explaining run. The call sites are sampled inside the program (libmssites, perf
events with sigtrap) in the same run that records the syscalls' arguments, with periods bounded by
rate; a storm's arguments are recorded for one call in P."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

from memsleuth.measure import allocators, launcher, native
from memsleuth.records import documents
from memsleuth.measure.plan import Cell
from conftest import fixture, ms_run, needs_tracepoints


def sampled(argv: list[str], sites: dict[str, int]) -> dict:
    s = launcher.run_cell(Cell(allocators.glibc(), {}, tuple(argv)), timeout_s=120, mem_limit_bytes=None,
                          syscall_args=True, sites=sites)
    assert s.ok, (s.status, s.detail, s.stderr_tail)
    assert s.where is not None
    return s.where


def python_under_sampler(program: str, spec: str, out) -> subprocess.CompletedProcess:
    """A Python program with libmssites preloaded, sampling `spec` (MEMSLEUTH_SITES) into `out`."""
    return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True,
                          env={**os.environ, "LD_PRELOAD": str(native.native_path("libmssites.so")),
                               "MEMSLEUTH_SITES": spec, "MEMSLEUTH_SITES_OUT": str(out)})


@needs_tracepoints
def test_the_sampler_takes_one_call_in_its_period_and_names_the_line():
    got = sampled([fixture("plain-madvise_pool"), "20000"], {"madvise": 50, "page-faults": 50})
    assert got.get("sampler") == "in-program", got
    madvise = got["events"]["madvise"]
    # every 50th of 20,000 calls: the period is the kernel's, so the count is exact (not one per call)
    assert madvise["samples"] == 400, madvise
    assert madvise["period"] == 50
    site, share = madvise["user_sites"][0]
    assert re.search(r"main \(madvise_pool\.c:\d+\)", site) and share > 0.95, madvise
    assert madvise["through_allocator"] == 0           # the program's own pool makes the calls
    faults = got["events"]["page-faults"]
    assert faults["samples"] > 100 and "madvise_pool.c:" in faults["user_sites"][0][0], faults


@needs_tracepoints
def test_threads_and_forked_children_are_sampled_too():
    # plain-arenas faults in its threads; sh runs two copies, so two processes leave documents
    prog = fixture("plain-arenas")
    got = sampled(["sh", "-c", f"{prog} & {prog}; wait"], {"page-faults": 20})
    faults = got["events"]["page-faults"]
    assert faults["samples"] > 50, faults
    assert any("arenas.c:" in site for site, _ in faults["user_sites"]), faults


def test_a_sigtrap_that_is_not_the_samplers_keeps_its_default_action(tmp_path):
    out = tmp_path / "sites"
    out.mkdir()
    proc = subprocess.run(["sh", "-c", "kill -TRAP $$"], env={"LD_PRELOAD": str(native.native_path("libmssites.so")),
                                                              "MEMSLEUTH_SITES": "page-faults=1000",
                                                              "MEMSLEUTH_SITES_OUT": str(out), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == -5        # killed by SIGTRAP, as without the sampler


def test_children_about_to_exec_never_die_of_the_samplers_sigtrap(tmp_path):
    """A child made by posix_spawn (glibc resets its handled signals to SIG_DFL inside, then it faults
    on its new stack), or by fork() and resetting every signal as git does before exec, must not get
    the sampler's SIGTRAP with no handler: all 200 of 200 children died of it before (so did `git
    clone --no-local`'s upload-pack, and check ran a third run under perf record). A forked worker
    that never execs is still sampled, with events of its own."""
    out = tmp_path / "sites"
    out.mkdir()
    env = {**os.environ, "LD_PRELOAD": str(native.native_path("libmssites.so")), "MEMSLEUTH_SITES": "page-faults=1",
           "MEMSLEUTH_SITES_OUT": str(out)}
    prog = fixture("fx-spawn_children")
    for mode, n in (("spawn", "200"), ("fork", "200"), ("worker", "64")):
        proc = subprocess.run([prog, mode, n], capture_output=True, text=True, env=env)
        assert proc.returncode == 0, (mode, proc.stdout, proc.stderr)
    docs = documents.run_documents(str(out), "sites")
    opened = [d for d in docs if d["events"] and d["events"][0]["opened"]]
    if not opened:
        pytest.skip(f"the sampler's event did not open here: {docs[0]['events'][0].get('why') if docs else 'no document'}")
    # the worker: 16,384 pages written after its fork, every fault sampled (the stacks' counts)
    worker = max(docs, key=lambda d: sum(c for ev, c, _ in d["stacks"] if ev == 0))
    assert sum(c for ev, c, _ in worker["stacks"] if ev == 0) > 10_000, worker["samples"]


def test_a_program_that_sets_its_own_sigtrap_handler_keeps_it_for_its_own_sigtraps(tmp_path):
    """The program's SIGTRAP handler, set after the sampler's, takes the SIGTRAPs that are not the
    sampler's; the sampler's stay its own (the program set its handler with signal(): before, that
    replaced the sampler's, and every sample went to the program's handler)."""
    out = tmp_path / "sites"
    out.mkdir()
    program = ("import os, signal\n"
               "got = []\n"
               "signal.signal(signal.SIGTRAP, lambda *a: got.append(1))\n"
               "for _ in range(10):\n"
               "    b = bytearray(8 << 20)\n"
               "os.kill(os.getpid(), signal.SIGTRAP)\n"
               "print(len(got), signal.getsignal(signal.SIGTRAP) is not signal.SIG_DFL)\n")
    proc = python_under_sampler(program, "page-faults=50", out)
    assert proc.stdout.split() == ["1", "True"], proc.stdout       # its own SIGTRAP, once
    (doc,) = [d for d in documents.run_documents(str(out), "sites") if d["samples"]] or [None]
    if doc is None:
        pytest.skip("the sampler took no sample here (its event did not open)")
    assert doc["samples"] > 100, doc["samples"]                    # 20,480 pages written, one in 50


def test_a_forked_worker_that_exits_leaves_its_parent_sampled(tmp_path):
    # The worker's fd is its parent's event: switching it off at the worker's exit switched off the
    # parent's sampling (and every other worker's) for the rest of the run.
    out = tmp_path / "sites"
    out.mkdir()
    program = ("import os\n"
               "for _ in range(3):\n"
               "    pid = os.fork()\n"
               "    if pid == 0:\n"
               "        os._exit(0)\n"
               "    os.waitpid(pid, 0)\n"
               "for _ in range(10):\n"
               "    b = b'x' * (32 << 20)\n"
               "print(os.getpid())\n")
    proc = python_under_sampler(program, "page-faults=500", out)
    docs = {d["pid"]: d for d in documents.run_documents(str(out), "sites")}
    parent = docs[int(proc.stdout.split()[-1])]
    if not parent["events"][0]["opened"]:
        pytest.skip(f"the sampler's event did not open here: {parent['events'][0].get('why')}")
    assert len(docs) == 4, sorted(docs)                  # the parent and its three workers
    # 80,000 pages written after the workers ended: one sample in 500 is ~160
    assert parent["samples"] > 80, parent["samples"]


def test_processes_ending_together_each_leave_one_whole_document(tmp_path):
    """Both libraries append each process's document to one file per kind (msj_append_line): 120
    processes ending at once, forty at a time, leave 120 documents of each kind that read whole,
    each with its own pid (interleaved appends would cut them)."""
    out = tmp_path / "docs"
    out.mkdir()
    lib = ":".join(str(native.native_path(n)) for n in ("libmsheap.so", "libmssites.so"))
    tree = "for i in $(seq 3); do for j in $(seq 40); do /bin/true & done; wait; done"
    subprocess.run(["sh", "-c", tree], check=True, env={
        **os.environ, "LD_PRELOAD": lib, "MEMSLEUTH_SITES": "page-faults=7", "MEMSLEUTH_SITES_OUT": str(out),
        "MEMSLEUTH_HEAP_OUT": str(out)})
    for kind in ("sites", "heap"):
        lines = [line for line in (out / f"{kind}.jsonl").read_text().split("\n") if line.strip()]
        docs = documents.run_documents(str(out), kind)
        assert len(docs) == len(lines), kind                  # every line reads as a document
        pids = [d["pid"] for d in docs]
        assert len(set(pids)) == len(pids) >= 121, (kind, len(pids))   # the shells and the 120 processes
    assert sorted(p.name for p in out.iterdir()) == ["heap.jsonl", "sites.jsonl"]


@needs_tracepoints
def test_a_storms_arguments_are_recorded_for_one_call_in_p_and_scaled():
    doc = ms_run("--syscall-args", "--syscall-args-every", "madvise=31", "--", fixture("plain-madvise_pool"), "31000")
    m = doc["syscall_args"]["madvise"]
    assert m["every"] == 31 and doc["syscalls"]["madvise"] == 31000
    # The events are per CPU (msr_args.c), each with its own period: a process that moved between
    # CPUs leaves up to P - 1 calls unrecorded on each, so the estimate is within CPUs x P.
    assert 31000 - os.cpu_count() * 31 <= m["calls"] <= 31000 and m["calls"] % 31 == 0
    assert m["bytes"] == m["calls"] * (64 << 10)
    assert m["by_advice"]["4"] == [m["calls"], m["bytes"]]    # MADV_DONTNEED


def test_brk_is_never_sampled():
    proc = subprocess.run([str(native.ms_run()), "--syscall-args-every", "brk=31", "--", "true"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "munmap, madvise, mmap, mremap" in proc.stderr


@needs_tracepoints
def test_with_the_heap_accounting_beside_it_the_sampler_still_writes_its_stacks():
    # Both libraries preloaded in one explaining run, as check makes it for a run of 16 MiB or
    # more: each must write its own document (before, the sampler's calls bound to the heap
    # library's exit hooks, its document was lost and every such check fell back to perf record).
    s = launcher.run_cell(Cell(allocators.glibc(), {}, (fixture("plain-bigtouch"), "64")), timeout_s=120,
                          mem_limit_bytes=None, syscall_args=True, heap=True, sites={"page-faults": 50})
    assert s.ok, (s.status, s.detail, s.stderr_tail)
    assert s.where and s.where.get("sampler") == "in-program", s.where
    assert s.where["events"]["page-faults"]["samples"] > 100, s.where["events"]
    assert s.heap and s.heap.processes, s.heap


@needs_tracepoints
def test_check_explains_in_one_run_with_the_sampled_sites(tmp_path):
    js = tmp_path / "c.json"
    from conftest import memsleuth
    proc = memsleuth("check", "--db", str(tmp_path / "c.db"), "--json", str(js), "--",
                     fixture("plain-madvise_pool"), "100000")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(js.read_text())
    storm = next(f for c in doc["cells"] for f in c["summary"]["findings"] if f["id"] == "madvise-storm")
    sites = " ".join(storm["call_sites"])
    n = int(re.search(r"madvise calls come from \(of (\d+) sampled stacks\)", sites).group(1))
    assert 300 <= n <= 500, sites          # bounded by rate: about where.TARGET_SAMPLES, not 100,000
    # the storm's advice was read from one call in P (runner.args_every) and says so
    assert any("estimated from one call in" in e for e in storm["evidence"]), storm["evidence"]
    assert "MADV_DONTNEED" in " ".join(storm["evidence"])


@needs_tracepoints
def test_where_the_sampler_cannot_run_perf_record_names_the_same_lines(tmp_path):
    import shutil
    import sys
    if shutil.which("perf") is None:
        import pytest
        pytest.skip("perf is not installed (linux-perf)")
    js = tmp_path / "c.json"
    # as on a kernel before 6.2: where.sampler_usable says no
    code = ("import sys; from memsleuth.measure import where; where.sampler_usable = lambda *a: False; "
            "from memsleuth.cli import main; sys.exit(main(sys.argv[1:]))")
    proc = subprocess.run([sys.executable, "-c", code, "check", "--db", str(tmp_path / "c.db"), "--json", str(js), "--",
                           fixture("plain-steps"), "20"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(js.read_text())
    assert doc["cells"][0]["where"].get("sampler") is None       # perf record's, not the sampler's
    f = next(f for c in doc["cells"] for f in c["summary"]["findings"] if f["id"] == "heap-trim-churn")
    sites = " ".join(f["call_sites"])
    assert "steps.c:18" in sites and "systrim" in sites and "steps.c:15" in sites, sites


def test_the_call_before_a_return_address_is_read_through_the_plt_the_got_and_directly(tmp_path):
    """records/calls.py: what a program's call before a return address called (the function that
    tail-called a frameless leaf), read from the object's bytes, on programs gcc builds three ways."""
    from memsleuth.records import calls
    src = tmp_path / "c.c"
    src.write_text("#include <stdio.h>\n#include <stdlib.h>\n"
                   "__attribute__((noinline)) char *mine(size_t n) { return calloc(n, 1); }\n"
                   "int main(int c, char **v) { char *p = calloc(c, 8), *q = mine(c + 1); p[0] = q[0] = 'a';"
                   " puts(p); puts(q); free(p); free(q); return 0; }\n")
    for flags in ([], ["-fno-plt"], ["-no-pie"]):
        exe = tmp_path / ("c" + "".join(flags))
        subprocess.run(["gcc", "-O2", *flags, "-o", str(exe), str(src)], check=True)
        dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(exe)], capture_output=True, text=True,
                             check=True).stdout
        lines = dis.splitlines()
        got = {}
        for k, line in enumerate(lines):           # the address after each call: the return address
            m = re.match(r"\s*([0-9a-f]+):\s+call\s+(.*)$", line)
            if m and k + 1 < len(lines) and re.match(r"\s*[0-9a-f]+:", lines[k + 1]):
                ret = int(lines[k + 1].split(":")[0], 16)
                target = "calloc" if "calloc" in m.group(2) else "mine" if "<mine>" in m.group(2) else None
                if target:
                    got[target] = calls.callee(str(exe), ret)
        assert got.get("calloc") == ("calloc", False), (flags, got)
        assert got.get("mine") == ("mine", True), (flags, got)
    assert calls.callee(str(src), 100) is None                      # not an ELF object


def test_the_symbolizer_reads_the_objects_a_running_tree_maps_before_it_is_asked():
    """check's explaining run goes while the symbolizer reads the program's objects (session.
    warm_the_symbolizer): a process's children are found through every thread's children list, the
    files it maps executable from its maps; the symbolizer started then answers later queries."""
    import shutil
    from memsleuth.records import proc, symbols
    if symbols._llvm_tool() is None:
        pytest.skip("llvm-symbolizer is not installed")
    shell = subprocess.Popen(["sh", "-c", "sleep 30; :"], start_new_session=True)
    try:
        sleep_bin = os.path.realpath(shutil.which("sleep"))
        def has_libc(files: list[str]) -> bool:
            return any(os.path.basename(f).startswith("libc.so") for f in files)
        # sleep's image is there from its exec, libc once the dynamic linker mapped it (a moment later:
        # read at once, under CI's load, its maps held no libc yet)
        files: list[str] = []
        for _ in range(100):
            below = proc.descendants(os.getpid())
            sleeping = [p for p in below if os.path.realpath(f"/proc/{p}/exe") == sleep_bin]
            files = proc.executable_files(sleeping[0]) if sleeping else []
            if shell.pid in below and sleeping and has_libc(files):
                break
            time.sleep(0.02)
        assert shell.pid in below and sleeping and has_libc(files), (below, files)
        mine = proc.children(os.getpid())
        assert shell.pid in mine and not set(sleeping) & set(mine), (mine, sleeping)
        libc = next(f for f in files if os.path.basename(f).startswith("libc.so"))
        assert files[0] == sleep_bin and len(set(files)) == len(files), files
        assert proc.executable_files(2 ** 22 + 7) == [] and proc.descendants(2 ** 22 + 7) == []
        symbols.warm([libc, "/nonexistent", 'a"quoted'])
        started = symbols._SYMBOLIZER
        assert started is not None and started.proc.poll() is None
        found, notes = symbols.symbolize({libc: {symbols._entry(libc)}})
        assert symbols._SYMBOLIZER is started and not notes and found
    finally:
        os.killpg(shell.pid, 9)
        shell.wait()


def test_both_libraries_run_under_valgrind_without_an_error_of_their_own(tmp_path):
    """`check -- valgrind --error-exitcode=9 PROG`: the heap accounting read a block's header under
    valgrind's malloc (memcheck: invalid read in heap_init, exit 9), and the sampler's SIGTRAP ended
    valgrind ("Valgrind received a signal 5 (SIGTRAP) - exiting"): both explaining runs failed. The
    accounting reads headers only under glibc's own sizes; the sampler opens nothing under valgrind
    and its document says why."""
    import shutil
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is not installed here")
    out = tmp_path / "docs"
    out.mkdir()
    libs = ":".join(str(native.native_path(n)) for n in ("libmsheap.so", "libmssites.so"))
    proc = subprocess.run(["valgrind", "-q", "--error-exitcode=9", fixture("plain-steps"), "2"], capture_output=True,
                          text=True, env={**os.environ, "LD_PRELOAD": libs, "MEMSLEUTH_HEAP_OUT": str(out),
                                          "MEMSLEUTH_SITES_OUT": str(out), "MEMSLEUTH_SITES": "page-faults=7,mmap=1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    (doc,) = documents.run_documents(str(out), "sites")
    assert all(not e["opened"] and "valgrind" in e["why"] for e in doc["events"]), doc["events"]
    assert documents.run_documents(str(out), "heap"), "the heap accounting wrote its document"
