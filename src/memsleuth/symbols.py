"""Names for the return addresses the explaining-run libraries sample (heap.py: allocation stacks;
where.py: the stacks of page faults and system calls), resolved once per object with addr2line.

The libraries write the process's executable mappings with their samples ([lo, hi, file offset,
path]), so an address is named after the process is gone: its object, and the address addr2line
wants (an offset in a shared object or a PIE, the address itself in a fixed-address executable).
Frames are return addresses (the sites sampler stores its exact pc + 1 the same way), so one byte
back lies in the line of the call itself.
"""
from __future__ import annotations

import os
import subprocess
from collections import defaultdict
from dataclasses import dataclass

ADDR2LINE_TIMEOUT_S = 60.0
ET_EXEC = 2


@dataclass(frozen=True)
class Frame:
    path: str                    # the object's file ("" when no mapping holds the address)
    offset: int                  # the address as addr2line takes it for that object
    function: str | None         # None: no symbol (stripped)
    line: str | None             # "file.c:18" (file name only), None: no line information

    @property
    def object(self) -> str:
        return os.path.basename(self.path) if self.path else "an unknown object"

    def text(self) -> str:
        """'function (file.c:18)', or what is missing said in words."""
        return site_text(self.function, self.path, self.line, self.offset)


def site_text(function: str | None, path: str, line: str | None, offset: int | None = None) -> str:
    """How a frame is named in reports (heap sites and call sites alike): 'function (file.c:18)',
    or what is missing said in words."""
    obj = os.path.basename(path) if path else "an unknown object"
    if function is None:
        where = f" at offset {hex(offset)}" if offset is not None else ""
        return f"an address in {obj}{where} (no symbols: stripped?)"
    if line is None:
        return f"{function} ({obj}, no line information)"
    return f"{function} ({line})"


def _elf_type(path: str) -> int | None:
    try:
        with open(path, "rb") as f:
            head = f.read(18)
    except OSError:
        return None
    if len(head) < 18 or head[:4] != b"\x7fELF":
        return None
    return int.from_bytes(head[16:18], "little")


def locate(maps: list, addr: int) -> tuple[str, int] | None:
    """(object path, addr2line's address) for a sampled return address, or None."""
    m = next((m for m in maps if isinstance(m, list) and len(m) >= 4 and m[0] <= addr < m[1]), None)
    if m is None:
        return None
    path = str(m[3])
    return path, (addr if _elf_type(path) == ET_EXEC else addr - m[0] + m[2]) - 1


def addr2line(path: str, offsets: list[int]) -> dict[int, tuple[str | None, str | None]]:
    """offset -> (function, 'file:line'), one addr2line process for the object."""
    if not offsets:
        return {}
    try:
        proc = subprocess.run(["addr2line", "-f", "-C", "-e", path, *[hex(a) for a in offsets]], capture_output=True,
                              text=True, errors="replace", timeout=ADDR2LINE_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return {}
    lines = proc.stdout.splitlines()
    out = {}
    for i, a in enumerate(offsets):
        if 2 * i + 1 >= len(lines):
            break
        func, where = lines[2 * i].strip(), lines[2 * i + 1].strip().split(" (discriminator")[0]
        out[a] = (None if func == "??" else func,
                  None if where.startswith("??") or where.endswith(":0") else os.path.basename(where))
    return out


def resolve(docs: list[dict], frames_of, skip=None) -> dict[tuple[int, int], Frame]:
    """(document index, address) -> Frame for every address `frames_of(doc)` yields, with one
    addr2line per object. `skip(path)`: objects named by their file only (not looked up)."""
    wanted: dict[str, dict[int, list[tuple[int, int]]]] = defaultdict(lambda: defaultdict(list))
    named: dict[tuple[int, int], Frame] = {}
    for d_i, d in enumerate(docs):
        maps = d.get("maps") or []
        for a in frames_of(d):
            if not isinstance(a, int) or (d_i, a) in named:
                continue
            found = locate(maps, a)
            if found is None:
                named[(d_i, a)] = Frame("", a, None, None)
                continue
            path, key = found
            named[(d_i, a)] = Frame(path, key, None, None)
            wanted[path][key].append((d_i, a))
    for path, by_key in wanted.items():
        if skip is not None and skip(path):
            for key, refs in by_key.items():
                for ref in refs:
                    named[ref] = Frame(path, key, os.path.basename(path), None)
            continue
        got = addr2line(path, list(by_key))
        for key, refs in by_key.items():
            func, line = got.get(key, (None, None))
            for ref in refs:
                named[ref] = Frame(path, key, func, line)
    return named
