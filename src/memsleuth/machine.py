"""What machine a run was made on, stored with every run: numbers are only comparable on the same one."""
from __future__ import annotations

import os
import platform
import socket
from pathlib import Path

from memsleuth.model import AllocatorInfo, MachineInfo


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


def info(allocators: list[AllocatorInfo] | None = None) -> MachineInfo:
    return MachineInfo(hostname=socket.gethostname(), cpu_model=cpu_model(), cpus=os.cpu_count(),
                       kernel=platform.release(), arch=platform.machine(), glibc=glibc_version(), thp=thp_mode(),
                       governor=governor(), mem_total_kb=mem_total_kb(), page_bytes=page_bytes(),
                       loadavg_1m=os.getloadavg()[0], python=platform.python_version(), allocators=allocators or [])
