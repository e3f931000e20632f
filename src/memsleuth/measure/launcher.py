"""Builds the ms-run argv for one cell (never a shell string) and parses its JSON into a Sample.

Two calls per cell: `check_preload` once (ms-run --preload-check: the command runs only up to
its first instruction, so no measured run carries the checker library), then `run_cell` for
every run.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time

from memsleuth.errors import stop_signal
from memsleuth.measure import native, workdirs
from memsleuth.records.documents import of_type, with_defaults
from memsleuth.records.evidence import Sample
from memsleuth.records.model import Counts
from memsleuth.measure.plan import Cell

# ms-run's own limit is the timeout; this margin only guards against ms-run itself hanging.
_GRACE_S = 30.0
# The preload check stops the command at its first instruction; ms-run gives it 30 s.


def _env_args(cell: Cell) -> list[str]:
    out: list[str] = []
    for k, v in cell.env.items():
        out += ["--env", f"{k}={v}"]
    return out


def msrun_argv(cell: Cell, out_path: str, *, timeout_s: float | None, mem_limit_bytes: int | None,
               counters: bool = True, syscalls: bool = True, syscall_args: bool = False,
               heap_dir: str | None = None,
               sites_dir: str | None = None, sites: dict[str, int] | None = None,
               args_every: dict[str, int] | None = None, cpu_sample_us: int | None = None,
               cpu_stacks_dir: str | None = None, fault_share: float | None = None) -> list[str]:
    """syscalls False: a timed run, which counts no syscall by name (ms-run --no-syscalls);
    heap_dir: account the heap (libmsheap in front of the allocator), its documents written there;
    sites_dir: sample the call sites of `sites` ({event: period}, libmssites), their documents there;
    fault_share: the page faults traced in this share of the run's ticks only (runner.fault_share);
    cpu_sample_us: sample the tree's CPU time with kernel call chains (Sample.cpu_profile), and with
    cpu_stacks_dir, with user call chains too, their documents there (Sample.cpu_stacks)."""
    argv = [str(native.ms_run()), "--out", out_path]
    if timeout_s:
        argv += ["--timeout", repr(float(timeout_s))]
    if mem_limit_bytes:
        argv += ["--mem-limit", str(mem_limit_bytes)]
    # the faults traced in a share of the ticks (ms-run --fault-share), and the in-program sampler's
    # switched in the same ticks
    share = fault_share if syscall_args and counters and fault_share and fault_share < 1 else None
    preloads, env = [], []
    if heap_dir is not None:
        preloads.append(str(native.native_path("libmsheap.so")))
        env += ["--env", f"MEMSLEUTH_HEAP_OUT={heap_dir}"]
    if sites_dir is not None and sites:
        from memsleuth.measure import where
        preloads.append(where.library())
        env += ["--env", f"MEMSLEUTH_SITES_OUT={sites_dir}", "--env", f"MEMSLEUTH_SITES={where.sites_spec(sites)}"]
        if share and "page-faults" in sites:      # ms-run's msr_inside.c
            env += ["--env", f"MEMSLEUTH_SITES_SWITCH={float(share)!r}"]
        # The processes it cannot reach (a static executable, env -i) are sampled by the kernel.
        argv += ["--outside-sites", where.sites_spec(sites), "--outside-dir", sites_dir,
                 "--outside-skip", where.library()]
    if cell.allocator.preload:
        preloads.append(cell.allocator.preload)
    if preloads:
        argv += ["--preload", ":".join(preloads)]
    argv += env + _env_args(cell)
    if heap_dir is not None or sites_dir is not None:   # the runtimes name their compiled code
        argv.append("--note-cwds")                      # and may leave files where they ran
        from memsleuth.measure import perfmaps
        for k, v in perfmaps.perf_map_env(cell.env, dict(os.environ)).items():
            argv += ["--env", f"{k}={v}"]
    if cell.oom_exit_code is not None:
        argv += ["--oom-exit-code", str(cell.oom_exit_code)]
    if cell.stdin is not None:
        argv += ["--stdin", cell.stdin]
    if not counters:
        argv.append("--no-counters")
    elif not syscalls and not syscall_args:
        argv.append("--no-syscalls")
    if syscall_args and counters:
        argv.append("--syscall-args")
        for name, every in (args_every or {}).items():
            argv += ["--syscall-args-every", f"{name}={int(every)}"]
        if share:
            argv += ["--fault-share", repr(float(share))]
    if cpu_sample_us and counters:
        argv += ["--cpu-sample-us", str(int(cpu_sample_us))]
        if cpu_stacks_dir is not None:
            argv += ["--cpu-stacks-dir", cpu_stacks_dir]
    return argv + ["--", *cell.command]


def check_preload(cell: Cell) -> dict:
    """Which object malloc binds to in this cell's command, under its allocator and environment."""
    argv = [str(native.ms_run()), "--preload-check", "--expect-malloc", cell.allocator.malloc_object]
    if cell.allocator.preload:
        argv += ["--preload", cell.allocator.preload]
    argv += _env_args(cell) + ["--", *cell.command]
    return native.run_preload_check(argv)


# ms-run --preload-check's answer (native.run_preload_check): the fields read, where it lacks them.
PRELOAD_CHECK_DEFAULTS = {"preload_ok": None, "malloc_object": None, "why": None, "stderr_tail": "", "signal": None,
                          "signal_name": None}


def preload_failure(cell: Cell, check: dict) -> Sample | None:
    """The sample that records a failed preload check, or None when the preload took effect."""
    c = with_defaults(check, PRELOAD_CHECK_DEFAULTS)
    if c["preload_ok"] is not False:
        return None
    detail = f"{c['why']}: expected {cell.allocator.malloc_object}, got {c['malloc_object'] or '(no report)'}"
    if c["malloc_object"] and not cell.allocator.preload:
        # nothing preloaded and malloc elsewhere: the program brings its own allocator (links it, or defines malloc)
        detail += ("; the program brings its own allocator: with nothing preloaded, this cell does not measure glibc's "
                   "malloc (`memsleuth check` without --alloc runs the program under its own)")
    return Sample.from_msrun({"status": "preload-failed", "detail": detail, "argv": list(cell.command),
                              "stderr_tail": c["stderr_tail"], "signal": c["signal"], "signal_name": c["signal_name"],
                              "malloc_object": c["malloc_object"], "preload_check": check})


# With --metric, this much of the program's stdout is kept to find its figure in.
METRIC_TAIL_BYTES = 1 << 20


# On Ctrl-C or SIGTERM, ms-run is asked to end the command's tree (SIGTERM) and given this long
# before it is killed: subprocess.run would SIGKILL it at once and orphan the tree.
_STOP_GRACE_S = 5.0


def _run_msrun(argv: list[str], timeout: float | None) -> subprocess.CompletedProcess:
    with subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, errors="replace") as p:
        try:
            out, err = p.communicate(timeout=timeout)
        except BaseException:   # KeyboardInterrupt (Ctrl-C, SIGTERM), a timeout: stop the tree first
            p.terminate()
            try:
                p.communicate(timeout=_STOP_GRACE_S)
            except BaseException:
                p.kill()
            raise
    return subprocess.CompletedProcess(argv, p.returncode, out, err)


def run_cell(cell: Cell, *, timeout_s: float | None, mem_limit_bytes: int | None, counters: bool = True,
             syscalls: bool = True, syscall_args: bool = False, metric=None, heap: bool = False,
             sites: dict[str, int] | None = None, args_every: dict[str, int] | None = None,
             cpu_sample_us: int | None = None, fault_share: float | None = None) -> Sample:
    """One run; `syscalls` False: a timed run that counts no syscall by name. Explaining runs only:
    `heap`, with the heap accounting in front of the allocator (Sample.heap); `sites` ({event: period}),
    with the call sites sampled (Sample.where);
    `args_every` ({syscall: P}), the arguments of one call in P recorded (runner.args_every), the
    faults in `fault_share` of the run's ticks (runner.fault_share);
    `cpu_sample_us`, the CPU time sampled with kernel chains (Sample.cpu_profile)."""
    with workdirs.workdir("run") as tmp:
        out = os.path.join(tmp, "run.json")
        heap_dir = sites_dir = stacks_dir = None
        if cpu_sample_us and counters:
            stacks_dir = os.path.join(tmp, "cpu")
            os.mkdir(stacks_dir, 0o700)
        if heap:
            heap_dir = os.path.join(tmp, "heap")
            os.mkdir(heap_dir, 0o700)
        if sites:
            sites_dir = os.path.join(tmp, "sites")
            os.mkdir(sites_dir, 0o700)
        argv = msrun_argv(cell, out, timeout_s=timeout_s, mem_limit_bytes=mem_limit_bytes, counters=counters,
                          syscalls=syscalls, syscall_args=syscall_args, heap_dir=heap_dir, sites_dir=sites_dir,
                          sites=sites, args_every=args_every, cpu_sample_us=cpu_sample_us, cpu_stacks_dir=stacks_dir,
                          fault_share=fault_share)
        if metric is not None:
            argv[1:1] = ["--tail", str(METRIC_TAIL_BYTES)]
        started = time.time()
        try:
            proc = _run_msrun(argv, (timeout_s + _GRACE_S) if timeout_s else None)
        except subprocess.TimeoutExpired:
            _remove_left_behind(out, heap_dir, sites_dir, started)
            return _failed(f"ms-run did not return within {timeout_s}s + {_GRACE_S}s")
        except KeyboardInterrupt:
            _remove_left_behind(out, heap_dir, sites_dir, started)
            raise
        if proc.returncode == 130:
            _remove_left_behind(out, heap_dir, sites_dir, started)
            raise KeyboardInterrupt
        try:
            # The command's output tails are raw bytes: a program may print anything, so bytes
            # that are not UTF-8 are replaced rather than allowed to fail the whole run.
            with open(out, encoding="utf-8", errors="replace") as f:
                doc = json.load(f)
            doc.pop("cwds", None)       # where to look for what the run left (below), not evidence
        except (OSError, json.JSONDecodeError) as e:
            return _failed(f"ms-run failed (exit {proc.returncode}): {proc.stderr.strip() or e}")
        read_from = time.monotonic()     # reading the documents names their frames: symbolization's time
        if heap_dir is not None:
            from memsleuth.records import heap as heap_mod
            doc["heap"] = heap_mod.read(heap_dir)
        if sites_dir is not None:
            from memsleuth.records import sites
            doc["where"] = sites.read_sampled(sites_dir, cell.allocator.preload)
        if stacks_dir is not None:
            from memsleuth.records import cpu_stacks
            doc["cpu_stacks"] = cpu_stacks.read(stacks_dir, of_type(doc, "cpu_stacks", dict),
                                                int(cpu_sample_us) * 1000).to_dict()
        if heap_dir is not None or sites_dir is not None or stacks_dir is not None:
            doc["read_s"] = round(time.monotonic() - read_from, 3)
        _remove_left_behind(out, heap_dir, sites_dir, started)
    doc = normalise(doc)
    if metric is not None:
        read_metric(doc, metric)
    return Sample.from_msrun(doc)


def _remove_left_behind(out: str, heap_dir: str | None, sites_dir: str | None, started: float) -> None:
    """What the explaining run's processes wrote under perfmaps.PERF_MAP_ENV (perf maps, V8's
    logs), once read: its processes are those the kernel saw in the tree (ms-run's document) and
    those that left a document of their own; V8's logs are looked for in memsleuth's working
    directory and in each one the tree's processes ran in."""
    from memsleuth.records import documents
    pids = []
    for folder, kind in ((heap_dir, "heap"), (sites_dir, "sites")):
        if folder:
            pids += documents.documents_pids(folder, kind)
    cwds = [os.getcwd()]
    try:
        with open(out, encoding="utf-8", errors="replace") as f:
            doc = json.load(f)
        for sampler in ("outside_sites", "cpu_stacks"):
            pids += [p for p in of_type(of_type(doc, sampler, dict, {}), "pids", list, []) if isinstance(p, int)]
        cwds += [d for d in of_type(doc, "cwds", list, []) if isinstance(d, str) and d not in cwds]
    except (OSError, ValueError, AttributeError):
        pass
    from memsleuth.measure import perfmaps
    for cwd in cwds:      # where the tree's processes ran (ms-run --note-cwds): V8 writes its log there
        perfmaps.remove_left_behind(pids, started, cwd)


def read_metric(doc: dict, metric) -> None:
    """The benchmark's own figure from its output, as the sample's result; an ok run whose output
    does not match is a recorded error, never a crash."""
    from memsleuth.measure.plan import MetricTimeout
    doc.update(with_defaults(doc, {"stdout_tail": "", "status": "error"}))
    try:
        value = metric.read(doc["stdout_tail"]) if doc["status"] == "ok" else None
    except MetricTimeout as e:
        doc["status"], doc["detail"] = "error", str(e)
        value = None
    if value is not None:
        doc["result"] = {**of_type(doc, "result", dict, {}), "metric": value, "metric_name": metric.name,
                         "higher_is_better": metric.higher_is_better}
    elif doc["status"] == "ok":
        doc["status"] = "error"
        doc["detail"] = f"the output has no match for --metric {metric.name}={metric.regex} that is a finite number"
    # Only the end of the output goes into the store.
    doc["stdout_tail"] = doc["stdout_tail"][-4096:]


def normalise(doc: dict) -> dict:
    """ms-run's lines from MEMSLEUTH_FD, each parsed on its own: JSON objects become the `probe`
    list (regions), the workload's result line becomes `result`; anything else stays text."""
    if "fd_lines" not in doc:
        return doc
    probe: list = []
    result = None
    for line in doc.pop("fd_lines"):
        try:
            item = json.loads(line)
        except (json.JSONDecodeError, TypeError):
            probe.append(line)
            continue
        if isinstance(item, dict) and of_type(item, "type", str) == "result" and of_type(item, "result", dict):
            result = item["result"]
        else:
            probe.append(item)
    doc["probe"] = probe
    doc["result"] = result
    return doc


def _failed(detail: str) -> Sample:
    return Sample.from_msrun({"status": "error", "detail": detail})


# ---- attach: a window on running processes (check --pid) -----------------------------------------

# The attached window samples at rates, not periods (nothing was counted before it): each event's
# call chains about this often a second per CPU, the CPU time every ms, the faults' addresses one
# in ATTACH_FAULTS_EVERY of those traced, in a share of the window's ticks where they come faster than
# ATTACH_FAULTS_TRACED_S (each traced fault costs its thread ~0.2 us: tracing all of them made an mmap
# storm 11-15% slower in the window, bench/attach_overhead.py). The memory syscalls' arguments are
# read at every call (~0.7 us each here): a fault is told apart as a re-fault of memory given back
# only when the range it touches was seen given back, and a sampled subset misnamed most of a
# churn's faults first touches. Where perf records the window (DWARF call chains, better than the
# kernel's frame pointers), ms-run's kernel sampler leaves the faults to it: a sampling event on the
# faults costs each of them its lookup (an mmap storm of 600,000 faults a second ran 3-4% slower
# with it, bench/attach_overhead.py); the memory syscalls' samplers, cheap at their rates, stay as
# the fallback should perf fail in the window.
ATTACH_SITES_HZ = 100
ATTACH_CPU_US = 1000
ATTACH_FAULTS_EVERY = 23
ATTACH_FAULTS_TRACED_S = 100_000    # at most about this many faults a second traced (~2% of a CPU)


def attach_fault_share(rate: float | None) -> float | None:
    """The share of the window's ticks in which the faults are traced, from the processes' fault rate
    before it (None: every tick): a storm of 600,000 faults a second is traced in a sixth of them."""
    return round(ATTACH_FAULTS_TRACED_S / rate, 4) if rate and rate > ATTACH_FAULTS_TRACED_S else None


def attach_argv(pids: list[int], out_path: str, sites_dir: str, duration_s: float | None,
                fault_rate: float | None = None, perf_records: bool = False) -> list[str]:
    """ms-run --attach for a window on `pids` (None: until ms-run is told to stop); `fault_rate`: their
    page faults a second before it (attach_fault_share); `perf_records`: perf record samples the
    faults' call sites beside it."""
    from memsleuth.measure import where
    events = [e for e in where.EVENTS if not (perf_records and e == "page-faults")]
    argv = [str(native.ms_run()), "--attach", ",".join(str(p) for p in pids), "--out", out_path,
            "--duration", repr(float(duration_s or 0)), "--syscall-args", "--cpu-sample-us", str(ATTACH_CPU_US),
            "--outside-sites", where.sites_spec({e: 1 for e in events}), "--outside-freq", str(ATTACH_SITES_HZ),
            "--outside-dir", sites_dir]
    share = attach_fault_share(fault_rate)
    return argv + ["--syscall-args-every", f"faults={ATTACH_FAULTS_EVERY}",
                   *(["--fault-share", repr(share)] if share else [])]


# The signals that end an attached window (Ctrl-C, SIGTERM, SIGHUP); once it has ended they are held
# until the window is stored, so a second one cannot lose it.
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def attach_window(pids: list[int], duration_s: float | None, fault_period: int = 1000,
                  ended=None, fault_rate: float | None = None) -> tuple[Sample, dict, int | None]:
    """(the window as a Sample, its call sites, the signal that ended it or None) of running
    processes: ms-run --attach, and perf record (DWARF call graphs) beside it where perf is
    installed. Ctrl-C, SIGTERM or SIGHUP ends the window: both stop, and what they measured is kept.
    It returns with STOP_SIGNALS blocked: the caller unblocks them once the window is stored.
    `ended(seconds)`: called when the window has been written, before its call sites are named."""
    from memsleuth.measure import where
    from memsleuth.records.sites import read_sampled
    with workdirs.workdir("attach") as tmp:
        out, sites_dir = os.path.join(tmp, "run.json"), os.path.join(tmp, "sites")
        os.mkdir(sites_dir, 0o700)
        recorder = where.attach_recorder(pids, tmp, fault_period)
        proc = subprocess.Popen(attach_argv(pids, out, sites_dir, duration_s, fault_rate, recorder is not None),
                                stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace")
        # perf is told to stop when the window ends, not after ms-run has written it: its own stop
        # (draining its buffers, ~1 s of DWARF stacks) then overlaps ms-run's (analysis/attach cost).
        timer = threading.Timer(duration_s, where.signal_recorder, (recorder,)) if duration_s and recorder else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        stopped_by = None
        try:
            _, err = proc.communicate()
            signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        except KeyboardInterrupt as e:   # the window ends here: ms-run detaches and writes what it measured
            signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)   # a second Ctrl-C waits until it is stored
            stopped_by = stop_signal(e)
            proc.terminate()
            try:
                _, err = proc.communicate(timeout=_STOP_GRACE_S + 10)
            except BaseException:
                proc.kill()
                where.stop_recorder(recorder, {})
                signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
                raise
        try:
            with open(out, encoding="utf-8", errors="replace") as f:
                doc = json.load(f)
            doc.pop("cwds", None)       # where to look for what the run left (below), not evidence
        except (OSError, json.JSONDecodeError) as e:
            where.stop_recorder(recorder, {})
            return (_failed(f"ms-run --attach failed (exit {proc.returncode}): {err.strip() or e}"),
                    {"unavailable": "the window was not measured"}, stopped_by)
        if timer is not None:
            timer.cancel()
        sample = Sample.from_msrun(normalise(doc))
        if ended is not None:
            ended(sample.wall_ns / 1e9)
        counted = Counts({**sample.syscalls, "page-faults": sample.counters["page-faults-minor"] or 0})
        found = where.stop_recorder(recorder, counted)
        kernel = read_sampled(sites_dir, None, counts=counted)
        sites = found if found and "events" in found else kernel
        if found and "unavailable" in found and "events" in kernel:
            kernel.setdefault("notes", []).append(found["unavailable"])
    return sample, sites, stopped_by
