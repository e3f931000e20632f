"""What this machine can measure, and what will make its numbers noisy."""
from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from memsleuth.measure import allocators, machine, native
from memsleuth.events import SYSCALLS
from memsleuth.errors import UsageError
from memsleuth.records.documents import with_defaults
from memsleuth.records.model import Readings

VIRTIO_ID_BALLOON = 5
VIRTIO_BALLOON_F_FREE_PAGE_HINT = 3
VIRTIO_BALLOON_F_REPORTING = 5
# Load average per CPU above which concurrent work visibly steals time from a measurement.
LOAD_PER_CPU_WARN = 0.5


@dataclass
class Check:
    name: str
    value: str
    meaning: str
    ok: bool


def probe_events() -> dict:
    try:
        out = subprocess.run([str(native.ms_run()), "--events"], capture_output=True, text=True, timeout=30)
        return json.loads(out.stdout)
    except (OSError, subprocess.SubprocessError, json.JSONDecodeError, UsageError) as e:
        return {"error": str(e), "opened": [], "unsupported": {}}


def events_by() -> tuple[str | None, str | None]:
    """How ms-run's events follow a command here: ("cgroup" or "inherited", why not by cgroup), from
    a run of `true` (None where it did not run)."""
    import tempfile
    try:
        with tempfile.TemporaryDirectory(prefix="memsleuth-doctor-") as d:
            out = os.path.join(d, "run.json")
            subprocess.run([str(native.ms_run()), "--out", out, "--", "true"], capture_output=True, timeout=30)
            with open(out, encoding="utf-8") as f:
                doc = json.load(f)
        doc = with_defaults(doc, {"events_by": None, "events_by_why": None})
        return doc["events_by"], doc["events_by_why"]
    except (OSError, subprocess.SubprocessError, json.JSONDecodeError, UsageError):
        return None, None


def balloon_features() -> tuple[bool, set[int]]:
    """(a virtio balloon is present, its negotiated feature bits)."""
    base = Path("/sys/bus/virtio/devices")
    if not base.is_dir():
        return False, set()
    for dev in base.iterdir():
        try:
            if int((dev / "device").read_text().strip(), 16) != VIRTIO_ID_BALLOON:
                continue
            bits = (dev / "features").read_text().strip()
            return True, {i for i, b in enumerate(bits) if b == "1"}
        except (OSError, ValueError):
            continue
    return False, set()


def checks() -> list[Check]:
    ev = with_defaults(probe_events(), {"opened": [], "unsupported": {}, "error": "unknown", "tracefs": None})
    opened = set(ev["opened"])
    unsupported = Readings(ev["unsupported"])
    result: list[Check] = []

    if "cycles" in opened:
        result.append(Check("PMU (hardware counters)", "present", "cycles, instructions, cache, branch, L1d and dTLB "
                            "misses are measured", True))
    else:
        why = unsupported["cycles"] or ev["error"]
        # "Permission denied" is not "no PMU": the hardware may be there and the kernel refuse it.
        denied = "Permission denied" in why or "not permitted" in why
        value = "not permitted" if denied else "absent"
        fix = ("run as root or lower /proc/sys/kernel/perf_event_paranoid to read them" if denied
               else "run on bare metal (or a VM that passes the PMU through) for those")
        result.append(Check("PMU (hardware counters)", value, f"{why}. Hardware columns read n/a; time, faults, "
                            "syscalls and RSS are still measured. IPC and cache/TLB misses are not available to "
                            f"explain a difference here: {fix}.", False))

    paranoid = machine._read("/proc/sys/kernel/perf_event_paranoid")
    root = os.geteuid() == 0
    result.append(Check("perf_event_paranoid", f"{paranoid}{' (running as root)' if root else ''}",
                        "root bypasses it" if root else
                        "<= 1 allows kernel-side counting of our own processes; 2 counts user space only, so "
                        "page-fault and syscall cost in the kernel is missed; tracepoints need root or <= -1",
                        root or (paranoid is not None and int(paranoid) <= 1)))

    syscalls_open = sorted(o for o in opened if o in SYSCALLS)
    if ev["tracefs"] and syscalls_open:
        result.append(Check("tracefs (syscall counts)", ev["tracefs"], "syscalls counted by name from "
                            f"syscalls:sys_enter_* tracepoints: {', '.join(syscalls_open)}", True))
    else:
        why = unsupported["madvise"] or "tracefs not found"
        result.append(Check("tracefs (syscall counts)", "unavailable", f"{why}. mmap/munmap/madvise/brk/futex columns "
                            "read n/a; run as root so tracefs can be mounted and read.", False))

    by, why = events_by()
    if by == "cgroup":
        result.append(Check("events follow the command by", "its own cgroup", "per-CPU perf events of a cgroup made "
                            "for the command: a thread or process it creates costs what it costs alone", True))
    elif by is not None:
        result.append(Check("events follow the command by", "inheritance", f"{why or 'no cgroup'}: each perf event is "
                            "copied into every thread and process the command creates, which then costs several "
                            "microseconds more per event (run as root on cgroup v2 for a cgroup of its own)", False))

    thp = machine.thp_mode()
    meaning = {"always": "large anonymous regions may get 2 MiB pages: fewer, costlier faults; results differ from "
                         "machines set to madvise",
               "madvise": "huge pages only where a program asks (MADV_HUGEPAGE); faults are per 4 KiB page otherwise",
               "never": "no transparent huge pages: every fault maps 4 KiB"}.get(thp or "", "THP mode unknown")
    result.append(Check("transparent huge pages", thp or "unknown", meaning, True))

    gov = machine.governor()
    if gov is None:
        result.append(Check("CPU governor", "none visible", "no cpufreq in this kernel (typical of a VM): frequency "
                            "is the host's business and may change under you", True))
    else:
        result.append(Check("CPU governor", gov, "fixed high frequency: good" if gov == "performance" else
                            "frequency changes with load: set 'performance' for stable timings", gov == "performance"))

    load = os.getloadavg()[0]
    cpus = os.cpu_count() or 1
    busy = load > LOAD_PER_CPU_WARN * cpus
    result.append(Check("load average (1 min)", f"{load:.2f} on {cpus} CPUs",
                        f"above {LOAD_PER_CPU_WARN} per CPU: other work competes with measurements" if busy else
                        "quiet enough", not busy))

    found = allocators.available()
    missing = allocators.missing()
    result.append(Check("allocators", ", ".join(f"{a.name} {a.version}" for a in found),
                        ("missing: " + ", ".join(f"{m} (apt-get install {allocators.DEBIAN_PACKAGES[m]})"
                                                 for m in missing)) if missing else "all known allocators found",
                        not missing))

    present, bits = balloon_features()
    if not present:
        result.append(Check("VM balloon", "none", "no virtio balloon: the host does not reclaim this guest's free pages",
                            True))
    elif VIRTIO_BALLOON_F_REPORTING in bits or VIRTIO_BALLOON_F_FREE_PAGE_HINT in bits:
        result.append(Check("VM balloon page reporting", "on", "free pages are reported back to the host, which may "
                            "reclaim them: faulting fresh memory in may then cost a host-side fault too, so its cost "
                            "varies. Compare fault-heavy timings interleaved and as ratios.", False))
    else:
        result.append(Check("VM balloon page reporting", "off", "a balloon exists but does not report free pages",
                            True))
    return result
