"""Allocator names to libraries: the distribution's packages, and the user's NAME=PATH.so.

glibc is the system malloc (nothing is preloaded). Every other allocator is LD_PRELOADed by
ms-run, which then checks that `malloc` really resolves to it (else the sample is
preload-failed). A path that is missing or does not load as a shared object is refused here,
before any run.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from memsleuth.measure import native
from memsleuth.errors import UsageError

# Library file names to look for, most specific first. tbbmalloc replaces malloc through its
# proxy library; libtbbmalloc.so itself only exports scalable_malloc.
KNOWN: dict[str, tuple[str, ...]] = {
    "mimalloc": ("libmimalloc.so.2", "libmimalloc.so"),
    "jemalloc": ("libjemalloc.so.2", "libjemalloc.so"),
    "tcmalloc": ("libtcmalloc_minimal.so.4", "libtcmalloc.so.4", "libtcmalloc_minimal.so", "libtcmalloc.so"),
    "tbbmalloc": ("libtbbmalloc_proxy.so.2", "libtbbmalloc_proxy.so"),
}
# The Debian package that provides each, for the set-up and for doctor's advice.
DEBIAN_PACKAGES = {
    "mimalloc": "libmimalloc2.0",
    "jemalloc": "libjemalloc2",
    "tcmalloc": "libtcmalloc-minimal4",
    "tbbmalloc": "libtbbmalloc2",
}
_SEARCH_DIRS = (
    "/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
    "/lib/aarch64-linux-gnu", "/usr/lib64", "/lib64", "/usr/lib", "/lib", "/usr/local/lib",
)
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.+-]{0,39}$")


@dataclass(frozen=True)
class Allocator:
    name: str
    path: str | None        # the library to preload; None for glibc (the system malloc)
    malloc_object: str       # the object malloc must resolve to in the child
    version: str
    source: str              # "system", "distribution", "user", or "program" (the program's own: linked, say)

    @property
    def preload(self) -> str | None:
        return self.path

    def to_dict(self) -> dict:
        return {"name": self.name, "path": self.path or self.malloc_object, "version": self.version,
                "source": self.source, "preloaded": self.path is not None}


@lru_cache(maxsize=1)
def _ldconfig_paths() -> dict[str, str]:
    """soname -> path from the dynamic linker's cache."""
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        try:
            out = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            return {}
    # A 64-bit process must not preload a 32-bit library: the cache tags 64-bit entries
    # ("libc6,x86-64", "libc6,AArch64" / "64bit").
    want_64 = sys.maxsize > 2**32
    paths: dict[str, str] = {}
    for line in out.splitlines():
        m = re.match(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)$", line)
        if m and (not want_64 or "64" in m.group(2)):
            paths.setdefault(m.group(1), m.group(3))
    return paths


def _find_library(filenames: tuple[str, ...]) -> str | None:
    cache = _ldconfig_paths()
    for fn in filenames:
        if fn in cache and os.path.exists(cache[fn]):
            return cache[fn]
        for d in _SEARCH_DIRS:
            p = os.path.join(d, fn)
            if os.path.exists(p):
                return p
    return None


def _package_version(path: str) -> str | None:
    """The Debian package version that owns `path`, if dpkg knows it."""
    real = os.path.realpath(path)
    for candidate in (real, path, real.replace("/usr/lib/", "/lib/", 1), real.replace("/lib/", "/usr/lib/", 1)):
        try:
            owner = subprocess.run(["dpkg-query", "-S", candidate], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        if owner.returncode == 0 and ":" in owner.stdout:
            pkg = owner.stdout.split(": ", 1)[0].split(",")[0].strip()
            ver = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True, text=True, timeout=10)
            if ver.returncode == 0 and ver.stdout.strip():
                return f"{ver.stdout.strip()} ({pkg.split(':')[0]})"
    return None


def _soname_version(path: str) -> str:
    """libmimalloc.so.2.0 -> '2.0': the best we know without a package manager."""
    m = re.search(r"\.so\.([\d.]+)$", os.path.basename(os.path.realpath(path)))
    return f"so {m.group(1)}" if m else "unknown"


def glibc() -> Allocator:
    libc = _find_library(("libc.so.6",)) or "/lib/x86_64-linux-gnu/libc.so.6"
    version = os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else None
    return Allocator("glibc", None, libc, (version or "unknown").replace("glibc ", ""), "system")


@lru_cache(maxsize=None)
def _distribution(name: str) -> Allocator | None:
    path = _find_library(KNOWN[name])
    if path is None:
        return None
    version = _package_version(path) or _soname_version(path)
    return Allocator(name, path, path, version, "distribution")


def available() -> list[Allocator]:
    """glibc and every known allocator installed on this machine."""
    found = [glibc()]
    for name in KNOWN:
        a = _distribution(name)
        if a is not None:
            found.append(a)
    return found


def missing() -> list[str]:
    return [n for n in KNOWN if _distribution(n) is None]


def check_preload(path: str) -> dict:
    """Whether `path` works as an LD_PRELOAD allocator: ms-run starts a small program (itself) with
    it preloaded, up to its first instruction, and reports which object malloc binds to. This is
    what LD_PRELOAD can load, not what dlopen can (a library with initial-exec TLS, like jemalloc,
    preloads fine and fails dlopen), and a constructor that crashes does so in that process."""
    ms_run = str(native.ms_run())
    return native.run_preload_check([ms_run, "--preload-check", "--preload", path, "--expect-malloc", path, "--",
                                     ms_run])


def user_allocator(name: str, path: str) -> Allocator:
    if not _NAME.match(name):
        raise UsageError(f"bad allocator name {name!r}: use letters, digits, '.', '_', '+' or '-'")
    p = Path(path).expanduser()
    if not p.exists():
        raise UsageError(f"allocator {name}: {path} does not exist")
    if not p.is_file():
        raise UsageError(f"allocator {name}: {path} is not a file")
    with open(p, "rb") as f:
        head = f.read(18)
    if head[:4] != b"\x7fELF" or len(head) < 18:
        raise UsageError(f"allocator {name}: {path} is not a shared object (not an ELF file)")
    if int.from_bytes(head[16:18], "little") != 3:  # e_type ET_DYN
        raise UsageError(f"allocator {name}: {path} is not a shared object (ELF, but not ET_DYN)")
    real = str(p.resolve())
    # Refused when LD_PRELOAD cannot load it (the dynamic linker says so, or its constructor
    # crashes); a library that loads but whose malloc the program does not reach is accepted,
    # and its runs then read PRELOAD-FAILED: that is a result about the library.
    check = check_preload(real)
    said = " ".join(line.strip() for line in (check.get("stderr_tail") or "").strip().splitlines()[-2:])
    why = None
    if check.get("signal_name"):
        why = f"a program with it preloaded was killed by SIG{check['signal_name']} before its first instruction"
    elif "cannot be preloaded" in said or not check.get("checked"):
        why = check.get("why") or "the dynamic linker refused it"
    if why:
        raise UsageError(f"allocator {name}: {path} does not load as an LD_PRELOAD library: {why}"
                         + (f" ({said})" if said else ""))
    return Allocator(name, real, real, _package_version(real) or _soname_version(real), "user")


def resolve(spec: str | None) -> list[Allocator]:
    """Parses --alloc: comma-separated names and NAME=PATH; None means every one found."""
    if spec is None:
        return available()
    result: list[Allocator] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        if "=" in item:
            name, path = item.split("=", 1)
            alloc = user_allocator(name.strip(), path.strip())
        elif item == "glibc":
            alloc = glibc()
        elif item in KNOWN:
            alloc = _distribution(item)
            if alloc is None:
                raise UsageError(
                    f"allocator {item} is not installed (Debian package {DEBIAN_PACKAGES[item]}); "
                    f"or give its library as {item}=/path/to/lib.so"
                )
        else:
            known = ", ".join(["glibc", *KNOWN])
            raise UsageError(f"unknown allocator {item!r}: known names are {known}, or give NAME=/path/to/lib.so")
        if any(a.name == alloc.name for a in result):
            raise UsageError(f"allocator {alloc.name} given twice")
        result.append(alloc)
    if not result:
        raise UsageError("--alloc names no allocator")
    return result


def linked_by_program(malloc_object: str) -> Allocator:
    """The allocator a program brings itself, as `check` names it when malloc binds there and not to
    glibc's (Debian's redis links libjemalloc ahead of libc): run as it is, nothing preloaded by
    memsleuth, its object expected. An installed allocator's library keeps its name and version; another object
    is named by its file (a library's stem, or the executable that defines malloc itself)."""
    real = os.path.realpath(malloc_object)
    for a in available():
        if a.path and os.path.realpath(a.path) == real:
            return Allocator(a.name, None, malloc_object, a.version, "program")
    stem = re.sub(r"\.so(\.[0-9.]*)?$", "", os.path.basename(real)) or "own"
    name = re.sub(r"[^A-Za-z0-9._+-]", "_", stem)
    return Allocator(name, None, malloc_object, _package_version(real) or _soname_version(real), "program")


def allocator_info(a: Allocator):
    """The allocator as the store records it (records.model.AllocatorInfo)."""
    from memsleuth.records.model import AllocatorInfo
    return AllocatorInfo.from_dict(a.to_dict())
