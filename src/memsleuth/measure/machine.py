"""What machine a run was made on, stored with every run: numbers are only comparable on the same one."""
from __future__ import annotations

import os
import platform
import socket
from pathlib import Path

from memsleuth.records.model import AllocatorInfo, MachineInfo


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def cpu_model() -> str:
    text = _read("/proc/cpuinfo") or ""
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def thp_mode() -> str | None:
    """The bracketed choice of /sys/kernel/mm/transparent_hugepage/enabled ('always', 'madvise', 'never')."""
    text = _read("/sys/kernel/mm/transparent_hugepage/enabled")
    if not text or "[" not in text:
        return None
    return text[text.index("[") + 1:text.index("]")]


def governor() -> str | None:
    return _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")


def glibc_version() -> str | None:
    v = os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else None
    return v.replace("glibc ", "") if v else None


def mem_total_kb() -> int | None:
    for line in (_read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1])
    return None


def page_bytes() -> int:
    """The base page size, measured: faults are counted per page."""
    return os.sysconf("SC_PAGE_SIZE")


# CPU flags that change memory behaviour or the operations memsleuth measures: cache-line
# flushes (seed 004), wide stores, huge pages, memory tagging/encryption. The fingerprint keeps
# these, not the hundred-odd others.
MEMORY_FLAGS = ("clflush", "clflushopt", "clwb", "avx", "avx2", "avx512f", "erms", "fsrm", "pdpe1gb", "pse", "sse2",
                "rdtscp", "invpcid", "pcid", "la57", "sme", "sev", "mte", "sve", "asimd")


def cpu_flags() -> list[str]:
    for line in (_read("/proc/cpuinfo") or "").splitlines():
        if line.startswith(("flags", "Features")):
            have = set(line.split(":", 1)[1].split())
            return [f for f in MEMORY_FLAGS if f in have]
    return []


def numa_nodes() -> int | None:
    try:
        return sum(1 for p in Path("/sys/devices/system/node").iterdir() if p.name.startswith("node")
                   and p.name[4:].isdigit()) or None
    except OSError:
        return None


def label() -> str | None:
    """--machine-label, passed on by the command line or a fleet task's environment."""
    return os.environ.get("MEMSLEUTH_MACHINE_LABEL") or None


_calibrating = None    # ms-calibrate, started by calibrate_soon and not read yet


def _start_calibration():
    import subprocess
    from memsleuth.measure import native
    return subprocess.Popen([str(native.native_path("ms-calibrate"))], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)


def calibrate_soon() -> None:
    """Starts ms-calibrate now, for unit_costs to read later: a measuring command calls it once its
    arguments are checked, so that the calibration (~50 ms) runs beside the command's own start-up
    (its imports, the store) instead of after it. Only where this process may run on two CPUs or
    more: on one, the start-up would preempt the calibration's timed batches."""
    global _calibrating
    try:
        if _calibrating is None and len(os.sched_getaffinity(0)) >= 2:
            _calibrating = _start_calibration()
    except Exception:   # noqa: BLE001 - no ms-calibrate: unit_costs then fails the usual way
        _calibrating = None


def unit_costs() -> dict:
    """What one page fault, one call of each memory system call, and counting one call cost here now
    (ms-calibrate, about 40 ms; started earlier by calibrate_soon where it was); {} when it cannot
    run (the findings then use findings.cost.DEFAULT). Read up to its output's end, not its exit:
    after it, ms-calibrate closes the tracepoint event it counted with, which waits out an RCU grace
    period; a daemon thread reaps it."""
    global _calibrating
    import json
    import threading
    try:
        proc, _calibrating = _calibrating or _start_calibration(), None
        watchdog = threading.Timer(10, proc.kill)
        watchdog.start()
        try:
            out = proc.stdout.read()
        finally:
            watchdog.cancel()
            proc.stdout.close()
            threading.Thread(target=proc.wait, name="ms-calibrate", daemon=True).start()
        doc = json.loads(out)
    except Exception:   # noqa: BLE001 - a missing or failing calibration only costs precision
        return {}
    return doc if isinstance(doc, dict) else {}


def info(allocators: list[AllocatorInfo] | None = None) -> MachineInfo:
    return MachineInfo(hostname=socket.gethostname(), label=label(), cpu_model=cpu_model(), cpus=os.cpu_count(),
                       kernel=platform.release(), arch=platform.machine(), glibc=glibc_version(), thp=thp_mode(),
                       governor=governor(), mem_total_kb=mem_total_kb(), page_bytes=page_bytes(),
                       loadavg_1m=os.getloadavg()[0], python=platform.python_version(), cpu_flags=cpu_flags(),
                       numa_nodes=numa_nodes(), allocators=allocators or [], unit_costs=unit_costs())
