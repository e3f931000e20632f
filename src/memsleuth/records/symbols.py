"""Names for the return addresses the explaining-run libraries sample (heap.py: allocation stacks;
records/sites.py: the stacks of page faults and system calls), and the frame that is the program's own.

The libraries write the process's executable mappings with their samples ([lo, hi, file offset,
path]), so an address is named after the process is gone: its object and the address in that
object's own terms (the file offset moved into the segment that holds it). Frames are return
addresses (the sites sampler stores its exact pc + 1 the same way), so one byte back lies in the
line of the call itself.

Symbolization is batched: only the sampled addresses, all objects in one llvm-symbolizer process
(DWARF 5, Go's line tables, inlined frames), else one `addr2line -i` per object, within
SYMBOLIZE_S in all; what was named is kept on disk by the object's build id
($XDG_CACHE_HOME/memsleuth/symbols), so a second run of the same program names nothing again. A
frame that the time left unnamed is said to be so, never waited for.

Code a runtime compiled at run time (V8's JIT, the JVM's, CPython 3.12's perf trampolines) has no
file: such a runtime writes /tmp/perf-PID.map when asked (measure/perfmaps.PERF_MAP_ENV, in the explaining
run only), and its frames are named from it in the program's own language (`language`).
"""
from __future__ import annotations

import atexit
import bisect
import functools
import hashlib
import json
import os
import re
import shutil
import stat
import struct
import select
import subprocess
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass

from memsleuth.textsafe import data_text

SYMBOLIZE_S = 15.0           # the whole symbolization of one run's stacks
CACHE_VERSION = 1
PT_LOAD, PT_NOTE, NT_GNU_BUILD_ID = 1, 4, 3
PERF_MAP_DIR = "/tmp"


@dataclass(frozen=True)
class Frame:
    path: str                    # the object's file ("" when no mapping holds the address)
    offset: int                  # the address in the object's terms, one byte back (a return address)
    function: str | None         # None: no symbol (stripped)
    line: str | None             # "file.c:18" (file name only), None: no line information
    source: str | None = None    # the source file's full path, as the debug information gives it
    language: str | None = None  # "JavaScript", "Python", "Java": a frame named from a runtime's perf map

    def __post_init__(self):
        # Names come from the program (its symbols, its perf map, its file names): made safe and cut once, here.
        for name in ("path", "function", "line", "source"):
            v = getattr(self, name)
            if v is not None:
                object.__setattr__(self, name, data_text(v))

    @property
    def object(self) -> str:
        return os.path.basename(self.path) if self.path else "an unknown object"

    def text(self) -> str:
        """'function (file.c:18)', or what is missing said in words."""
        if self.language:
            return f"{self.function} ({self.line})" if self.line else f"{self.function} ({self.language})"
        return site_text(self.function, self.path, self.line, self.offset)


def site_text(function: str | None, path: str, line: str | None, offset: int | None = None) -> str:
    """How a frame is named in reports (heap sites and call sites alike): 'function (file.c:18)',
    or what is missing said in words."""
    obj = os.path.basename(path) if path else "an unknown object"
    function = short_name(function) if function else function
    if function is None:
        where = f" at offset {hex(offset)}" if offset is not None else ""
        return f"an address in {obj}{where} (no symbols: stripped?)"
    if line is None:
        return f"{function} ({obj}, no line information)"
    return f"{function} ({line})"


@functools.lru_cache(maxsize=1 << 16)      # the same names come back in every stack (7,585 calls for one node check)
def short_name(function: str) -> str:
    """A demangled C++ name without its parameter list and qualifiers ('f(int) const' -> 'f'); the
    name as it is when it has none."""
    body = re.sub(r"\)\s*(const|volatile|&|&&|noexcept|\s)*$", ")", function)
    if not body.endswith(")") or body.endswith("operator()"):
        return function
    depth = 0
    for i in range(len(body) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(body[i], 0)
        if depth == 0:
            return _without_return_type(body[:i].rstrip()) or function
    return function


def _without_return_type(name: str) -> str:
    """A template function's demangled name starts with its return type: the part after the last
    space outside angle brackets is the name."""
    depth, cut = 0, 0
    for i, c in enumerate(name):
        depth += {"<": 1, ">": -1}.get(c, 0)
        if c == " " and depth == 0 and not name[:i].endswith("operator"):
            cut = i + 1
    return name[cut:]


# ---- objects --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Elf:
    loads: tuple[tuple[int, int, int], ...]   # PT_LOAD (file offset, address, file size)
    build_id: str | None


def elf(path: str) -> Elf | None:
    """The segments and build id of a 64-bit little-endian ELF object (x86-64, AArch64), or None."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return None
            phoff, = struct.unpack_from("<Q", head, 0x20)
            phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
            f.seek(phoff)
            table = f.read(phentsize * phnum)
            loads, notes = [], []
            for k in range(phnum):
                if (k + 1) * phentsize > len(table):
                    break
                ptype, _, off, vaddr, _, filesz = struct.unpack_from("<IIQQQQ", table, k * phentsize)
                if ptype == PT_LOAD:
                    loads.append((off, vaddr, filesz))
                elif ptype == PT_NOTE and filesz < 1 << 16:
                    notes.append((off, filesz))
            build_id = None
            for off, size in notes:
                f.seek(off)
                data, pos = f.read(size), 0
                while pos + 12 <= len(data) and build_id is None:
                    namesz, descsz, ntype = struct.unpack_from("<III", data, pos)
                    name_at, desc_at = pos + 12, pos + 12 + ((namesz + 3) & ~3)
                    if ntype == NT_GNU_BUILD_ID and data[name_at:name_at + namesz].rstrip(b"\0") == b"GNU":
                        build_id = data[desc_at:desc_at + descsz].hex() or None
                    pos = desc_at + ((descsz + 3) & ~3)
    except (OSError, struct.error):
        return None
    return Elf(tuple(loads), build_id)


_ELF: dict[str, Elf | None] = {}


def _elf_cached(path: str) -> Elf | None:
    if path not in _ELF:
        _ELF[path] = elf(path)
    return _ELF[path]


def locate(maps: list, addr: int) -> tuple[str, int] | None:
    """(object path, the address in the object's terms one byte back) for a sampled return
    address, or None when no executable file mapping holds it."""
    m = next((m for m in maps if isinstance(m, list) and len(m) >= 4 and m[0] <= addr < m[1]), None)
    if m is None:
        return None
    path = str(m[3])
    return path, file_address(path, addr - m[0] + m[2]) - 1


def file_address(path: str, offset: int) -> int:
    """A file offset as the object's own address (what symbolizers take): moved by the PT_LOAD
    segment that holds it. Unchanged when the object cannot be read."""
    e = _elf_cached(path)
    for off, vaddr, size in (e.loads if e else ()):
        if off <= offset < off + size:
            return offset - off + vaddr
    return offset


# ---- runtimes' perf maps ----------------------------------------------------------------------------

# V8: "JS:*name /path/file.js:10:5" ("LazyCompile:" before V8 9); "~" interpreted, "*" optimised.
# The name has no space; the script's path may.
V8_FRAME = re.compile(r"^(?:JS|LazyCompile|Function|Script):[*~^+]?(\S*) (.+?):(\d+)(?::\d+)?$")
# CPython 3.12+: "py::name:/path/file.py"
PY_FRAME = re.compile(r"^py::(.*?):(.+)$")
# The JVM (DumpPerfMapAtExit): "long Buffers.handle(int)": return type, class, method, parameters.
JAVA_FRAME = re.compile(r"^(?:[\w$.<>\[\]]+\s+)?([\w$.]+)\.([\w$<>]+)\(")


def language_frame(name: str) -> tuple[str, str, str | None, str | None] | None:
    """A perf map's name as (language, function, line text, source path), or None for the runtime's
    own code there (V8's builtins and stubs, the JVM's interpreter and stubs)."""
    m = V8_FRAME.match(name)
    if m:
        source = m.group(2)
        return "JavaScript", m.group(1) or "(anonymous)", f"{os.path.basename(source)}:{m.group(3)}", source
    m = PY_FRAME.match(name)
    if m:
        return "Python", m.group(1), os.path.basename(m.group(2)), m.group(2)
    if name.startswith(("Interpreter", "StubRoutines", "Stub", "Builtin:", "BytecodeHandler:", "RegExp:", "py::",
                        "[")):
        return None
    m = JAVA_FRAME.match(name)
    if m:
        cls = m.group(1)
        return "Java", f"{cls}.{m.group(2)}", None, cls
    return None


def _written_by(path: str, pid: int | None) -> bool:
    """Whether the file at path is a regular file (not a link) that this user, or the user the
    process runs as, owns: a map another user left in /tmp under the process's pid is not its own."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    owners = {os.geteuid()}
    if pid is not None:
        try:
            owners.add(os.stat(f"/proc/{int(pid)}").st_uid)
        except OSError:
            pass
    return stat.S_ISREG(st.st_mode) and st.st_uid in owners


class PerfMap:
    """One process's /tmp/perf-PID.map: [start, size, name] sorted by start; read only where the
    process (or this user) wrote it."""

    def __init__(self, path: str, pid: int | None = None):
        self.starts: list[int] = []
        self.entries: list[tuple[int, int, str]] = []
        try:
            if not _written_by(path, pid):
                raise OSError("not the process's own map")
            with open(path, encoding="utf-8", errors="replace", opener=_no_follow) as f:
                rows = []
                for line in f:
                    parts = line.rstrip("\n").split(" ", 2)
                    if len(parts) == 3:
                        try:
                            rows.append((int(parts[0], 16), int(parts[1], 16), parts[2]))
                        except ValueError:
                            continue
        except OSError:
            rows = []
        # a later entry for the same start (code moved, recompiled) wins
        by_start = {start: (start, size, name) for start, size, name in rows}
        self.entries = sorted(by_start.values())
        self.starts = [e[0] for e in self.entries]

    def find(self, addr: int) -> str | None:
        i = bisect.bisect_right(self.starts, addr) - 1
        if i >= 0:
            start, size, name = self.entries[i]
            if addr < start + max(size, 1):
                return name
        return None


def _no_follow(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW)


def perf_map_path(pid: int) -> str:
    return os.path.join(PERF_MAP_DIR, f"perf-{int(pid)}.map")


# ---- symbolizing ----------------------------------------------------------------------------------

def cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "memsleuth", "symbols")


def _file_identity(path: str) -> str | None:
    """The file itself: its real path, size and modification time; None where it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{os.path.realpath(path)}\0{st.st_size}\0{st.st_mtime_ns}"


def _object_key(path: str) -> str | None:
    e = _elf_cached(path)
    if e and e.build_id:
        return e.build_id
    ident = _file_identity(path)
    return "f-" + hashlib.sha1(ident.encode()).hexdigest() if ident is not None else None


def _unlined_key(path: str) -> str | None:
    """The cache of the answers without a line (an object with symbols and no debug information:
    Debian's node, a JVM): keyed by the file itself and by whether debug information for its build
    id is installed, so that the same build id found later with its lines is asked again. Without
    it, node's binary went to llvm-symbolizer on every check (0.3 s each)."""
    ident = _file_identity(path)
    if ident is None:
        return None
    e = _elf_cached(path)
    bid = e.build_id if e and e.build_id else ""
    debug = bool(bid) and os.path.exists(f"/usr/lib/debug/.build-id/{bid[:2]}/{bid[2:]}.debug")
    return "n-" + hashlib.sha1(f"{ident}\0{bid}\0{debug}".encode()).hexdigest()


# The cache files this process has read or changed, by path: each read from disk once and written
# back once, at exit (flush_caches), not at every store. A check names its frames in three readings
# (heap, call sites, CPU stacks), and node's file holds 20,000 entries: reading and rewriting it at
# each took 0.27 s of a node check's 4.6 s under cProfile.
_CACHES: dict[str, dict[str, list]] = {}
_CHANGED: set[str] = set()


def _cache_load(key: str) -> dict[str, list]:
    path = os.path.join(cache_dir(), key + ".json")
    if path not in _CACHES:
        _CACHES[path] = _cache_read(path)
    return _CACHES[path]


def _cache_read(path: str) -> dict[str, list]:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        return doc["frames"] if doc.get("v") == CACHE_VERSION and isinstance(doc.get("frames"), dict) else {}
    except (OSError, ValueError, KeyError, AttributeError):
        return {}


# At most this many addresses per object's cache file, the newest kept: the CPU samples' addresses in
# a runtime's binary differ from run to run, and the file is rewritten whole at each store.
CACHE_ENTRIES = 20_000


def _cache_store(key: str, frames: dict[str, list]) -> None:
    if len(frames) > CACHE_ENTRIES:
        frames = dict(list(frames.items())[-CACHE_ENTRIES:])
    path = os.path.join(cache_dir(), key + ".json")
    _CACHES[path] = frames
    _CHANGED.add(path)


@atexit.register
def flush_caches() -> None:
    """Writes the cache files this process changed (each whole, replaced at once)."""
    for path in sorted(_CHANGED):
        folder = os.path.dirname(path)
        try:
            os.makedirs(folder, 0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(json.dumps({"v": CACHE_VERSION, "frames": _CACHES[path]}))   # dumps: the C encoder
            os.replace(tmp, path)
        except OSError:
            pass   # a cache that cannot be written only costs the next run the same work
    _CHANGED.clear()


Chain = list  # [[function or None, source path or None, line or None], ...] innermost inlined first


def _parse_blocks(lines: list[str]) -> list[Chain]:
    """llvm-symbolizer's answers: per address, 'function' then 'file:line:col' per inlined frame,
    a blank line after each address."""
    out, cur = [], []
    i = 0
    while i < len(lines):
        if lines[i] == "":
            out.append(cur)
            cur = []
            i += 1
            continue
        func = lines[i]
        where = lines[i + 1] if i + 1 < len(lines) else "??:0:0"
        i += 2
        m = re.match(r"^(.*):(\d+):(\d+)$", where)
        source, line = (m.group(1), int(m.group(2))) if m else (where, 0)
        cur.append([None if func in ("??", "") else func, None if source in ("??", "") else source,
                    line or None])
    if cur:
        out.append(cur)
    return out


LLVM_ARGS = ("--inlines", "--demangle", "--functions=linkage", "--output-style=LLVM")


class _LlvmSymbolizer:
    """One llvm-symbolizer for the whole memsleuth process, asked again by each reader (call sites,
    CPU stacks, the heap's sites): an object it has loaded stays loaded. Node's 100 MB binary took
    about 0.1 s a load, three loads per check. Each answer ends with an empty line."""

    def __init__(self, tool: str):
        self.tool = tool
        self.proc = subprocess.Popen([tool, *LLVM_ARGS], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.lock = threading.Lock()

    def ask(self, text: bytes, n: int, deadline: float) -> str:
        """The answers to n queries, all of them or a TimeoutExpired (the process is then ended)."""
        proc = self.proc
        writer = threading.Thread(target=self._write, args=(text,), daemon=True)
        writer.start()      # written beside the reading: neither pipe can fill while the other waits
        got, blocks = bytearray(), 0
        fd = proc.stdout.fileno()
        while blocks < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self.close()
                raise subprocess.TimeoutExpired(self.tool, 0)
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                self.close()
                raise OSError("llvm-symbolizer ended")
            blocks += (bytes(got[-1:]) + chunk).count(b"\n\n")
            got += chunk
        writer.join(timeout=1)
        return got.decode("utf-8", "replace")

    def _write(self, text: bytes) -> None:
        try:
            self.proc.stdin.write(text)
            self.proc.stdin.flush()
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        global _SYMBOLIZER
        if _SYMBOLIZER is self:
            _SYMBOLIZER = None
        try:
            self.proc.kill()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.SubprocessError):
            pass


_SYMBOLIZER: _LlvmSymbolizer | None = None


@atexit.register
def _close_symbolizer() -> None:
    if _SYMBOLIZER is not None:
        _SYMBOLIZER.close()


_STARTING = threading.Lock()     # one symbolizer started, whichever thread asks first (warm)


def _symbolizer(tool: str) -> _LlvmSymbolizer:
    global _SYMBOLIZER
    with _STARTING:
        if _SYMBOLIZER is None or _SYMBOLIZER.tool != tool or _SYMBOLIZER.proc.poll() is not None:
            _SYMBOLIZER = _LlvmSymbolizer(tool)
        return _SYMBOLIZER


def _llvm_tool() -> str | None:
    return shutil.which("llvm-symbolizer") or next(
        (t for v in range(30, 10, -1) if (t := shutil.which(f"llvm-symbolizer-{v}"))), None)


def _llvm(tool: str, wanted: list[tuple[str, int]], deadline: float) -> dict[tuple[str, int], Chain]:
    asked = [(p, a) for p, a in wanted if '"' not in p and "\n" not in p]   # a path it cannot quote stays unnamed
    if not asked:
        return {}
    text = "".join(f'"{p}" {hex(a)}\n' for p, a in asked).encode("utf-8", "surrogateescape")
    symbolizer = _symbolizer(tool)
    with symbolizer.lock:
        out = symbolizer.ask(text, len(asked), deadline)
    blocks = _parse_blocks(out.split("\n"))
    return {ref: blocks[i] for i, ref in enumerate(asked) if i < len(blocks)}


def _addr2line(path: str, addrs: list[int], deadline: float) -> dict[tuple[str, int], Chain]:
    proc = subprocess.run(["addr2line", "-a", "-i", "-f", "-C", "-e", path, *[hex(a) for a in addrs]],
                          capture_output=True, text=True, errors="replace",
                          timeout=max(0.5, deadline - time.monotonic()))
    out: dict[tuple[str, int], Chain] = {}
    cur: Chain | None = None
    lines = proc.stdout.splitlines()
    i = 0
    while i < len(lines):
        if re.match(r"^0x[0-9a-f]+$", lines[i]):
            cur = out.setdefault((path, int(lines[i], 16)), [])
            i += 1
            continue
        func = lines[i].strip()
        where = lines[i + 1].strip().split(" (discriminator")[0] if i + 1 < len(lines) else "??:0"
        i += 2
        source, _, line = where.rpartition(":")
        if cur is not None:
            cur.append([None if func == "??" else func, None if source.startswith("??") or not source else source,
                        int(line) if line.isdigit() and int(line) > 0 else None])
    return out


# Rust's legacy mangling is Itanium's with its own escapes inside the names, which an Itanium
# demangler leaves ('_$LT$mimalloc..MiMalloc$u20$as$u20$...$GT$::alloc_zeroed::h2a41e6efc77e790d'),
# and a hash as the last segment.
_RUST_HASH = re.compile(r"::h[0-9a-f]{16}$")
_RUST_ESCAPES = {"$SP$": "@", "$BP$": "*", "$RF$": "&", "$LT$": "<", "$GT$": ">", "$LP$": "(", "$RP$": ")",
                 "$C$": ","}
_RUST_ESCAPE = re.compile(r"\$(SP|BP|RF|LT|GT|LP|RP|C|u[0-9a-f]{2,6})\$")


def rust_legacy(name: str) -> str:
    """A Rust legacy name as Rust writes it ('<mimalloc::MiMalloc as ...GlobalAlloc>::alloc_zeroed');
    any other name as it is."""
    if not _RUST_HASH.search(name):
        return name

    def one(m: re.Match) -> str:
        code = m.group(1)
        return chr(int(code[1:], 16)) if code.startswith("u") else _RUST_ESCAPES[m.group(0)]
    body = _RUST_HASH.sub("", name)
    body = re.sub(r"(^|::)_(?=\$)", r"\1", body)          # '_$LT$' at a segment's start is '<'
    return _RUST_ESCAPE.sub(one, body).replace("..", "::")


def _demangle(chains: dict[tuple[str, int], Chain]) -> None:
    """Names the symbolizer left mangled (its demangler is older than the compiler) through one
    c++filt, and Rust's legacy escapes decoded (rust_legacy), in place."""
    for chain in chains.values():
        for f in chain:
            if f[0] and _RUST_HASH.search(f[0]):
                f[0] = rust_legacy(f[0])
    mangled = sorted({f[0] for chain in chains.values() for f in chain if f[0] and f[0].startswith("_Z")})
    tool = shutil.which("c++filt")
    if not mangled or tool is None:
        return
    try:
        out = subprocess.run([tool], input="\n".join(mangled) + "\n", capture_output=True, text=True,
                             errors="replace", timeout=10).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return
    if len(out) != len(mangled):
        return
    names = dict(zip(mangled, out))
    for chain in chains.values():
        for f in chain:
            if f[0] in names:
                f[0] = names[f[0]]


def symbolize(wanted: dict[str, set[int]], budget_s: float = SYMBOLIZE_S) -> tuple[dict[tuple[str, int], Chain],
                                                                                  list[str]]:
    """{(object, address): chain} for every address asked for, from the cache first, then one
    batch symbolizer within `budget_s`; and notes on what could not be named."""
    deadline = time.monotonic() + budget_s
    found: dict[tuple[str, int], Chain] = {}
    todo: dict[str, list[int]] = {}
    caches: dict[str, tuple[str, dict, str | None, dict]] = {}
    for path, addrs in wanted.items():
        key = _object_key(path)
        cached = _cache_load(key) if key else {}
        unlined_key = _unlined_key(path) if key else None
        unlined = _cache_load(unlined_key) if unlined_key else {}
        if key:
            caches[path] = (key, cached, unlined_key, unlined)
        for a in addrs:
            hit = cached.get(hex(a))
            if hit is None:
                hit = unlined.get(hex(a))
            if hit is not None:
                found[(path, a)] = hit
            else:
                todo.setdefault(path, []).append(a)
    notes: list[str] = []
    if todo:
        got: dict[tuple[str, int], Chain] = {}
        tool = _llvm_tool()
        try:
            if tool:
                got = _llvm(tool, [(p, a) for p, addrs in todo.items() for a in sorted(addrs)], deadline)
            elif shutil.which("addr2line"):
                for path, addrs in todo.items():
                    got.update(_addr2line(path, sorted(addrs), deadline))
            else:
                notes.append("no symbolizer (llvm-symbolizer or binutils' addr2line): frames named by object only")
        except subprocess.TimeoutExpired:
            notes.append(f"symbolizing took over {budget_s:.0f} s: the frames not named by then are given by object "
                         "and offset")
        except OSError as e:
            notes.append(f"the symbolizer failed ({e}): frames named by object only")
        found.update(got)
        for path, addrs in todo.items():
            if path not in caches or not any((path, a) in got for a in addrs):
                continue
            key, cached, unlined_key, unlined = caches[path]
            # What has a line is kept by build id; the rest by the file (_unlined_key): the same build id
            # may later come with its symbols or debug information (a stripped copy named first, its
            # unstripped build after).
            answered = {hex(a): got[(path, a)] for a in addrs if (path, a) in got}
            keep = {k: chain for k, chain in answered.items() if all(f[2] for f in chain)}
            rest = {k: chain for k, chain in answered.items() if k not in keep}
            if keep:
                _cache_store(key, {**cached, **keep})
            if rest and unlined_key:
                _cache_store(unlined_key, {**unlined, **rest})
    _demangle(found)    # names the symbolizer's demangler left mangled, cached ones included
    return found, notes


def warm(paths: list[str], budget_s: float = SYMBOLIZE_S) -> None:
    """Has the batch symbolizer read these objects before their addresses are asked (one query each,
    at its entry point, the answer dropped): llvm-symbolizer's first query in an object reads its
    symbols and debug information (node's 99 MB binary: ~0.1 s). Any failure leaves the naming as
    it would have been."""
    tool = _llvm_tool()
    asked = [p for p in paths if '"' not in p and "\n" not in p and os.path.isfile(p)]
    if not tool or not asked:
        return
    text = "".join(f'"{p}" {hex(_entry(p))}\n' for p in asked).encode("utf-8", "surrogateescape")
    try:
        symbolizer = _symbolizer(tool)
        with symbolizer.lock:
            symbolizer.ask(text, len(asked), time.monotonic() + budget_s)
    except (OSError, ValueError, subprocess.SubprocessError):
        pass


def _entry(path: str) -> int:
    """An ELF object's entry point (e_entry), or 0x1000 where it has none or is not one."""
    try:
        with open(path, "rb") as f:
            head = f.read(0x20)
        if head[:4] == b"\x7fELF" and head[4] == 2:
            return struct.unpack_from("<Q" if head[5] == 1 else ">Q", head, 0x18)[0] or 0x1000
    except (OSError, struct.error, IndexError):
        pass
    return 0x1000


def resolve_chain(path: str, key: int, chain: Chain | None) -> tuple[Frame, ...]:
    """A symbolizer's chain for one address as frames, innermost inlined first."""
    if not chain:
        return (Frame(path, key, None, None),)
    out = []
    for func, source, line in chain:
        out.append(Frame(path, key, func, f"{os.path.basename(source)}:{line}" if source and line else None,
                         source))
    return tuple(out)


def resolve(docs: list[dict], frames_of, skip=None, notes: list[str] | None = None) \
        -> dict[tuple[int, int], tuple[Frame, ...]]:
    """(document index, address) -> the frames at that address, innermost inlined first, the
    containing function last, for every address `frames_of(doc)` yields. `skip(path)`: objects
    named by their file only (not looked up). An address in no file mapping is looked up in the
    process's perf map (a runtime's compiled code). What could not be named is said in `notes`."""
    wanted: dict[str, set[int]] = defaultdict(set)
    placed: dict[tuple[int, int], tuple[str, int] | None] = {}
    perf_maps: dict[int, PerfMap] = {}
    named: dict[tuple[int, int], tuple[Frame, ...]] = {}
    for d_i, d in enumerate(docs):
        maps = d["maps"]
        for a in frames_of(d):
            if not isinstance(a, int) or (d_i, a) in placed:
                continue
            found = locate(maps, a)
            placed[(d_i, a)] = found
            if found is None:
                pid = d["pid"]
                if isinstance(pid, int) and pid not in perf_maps:
                    perf_maps[pid] = PerfMap(perf_map_path(pid), pid)
                name = perf_maps[pid].find(a - 1) if isinstance(pid, int) else None
                if name is not None:
                    lang = language_frame(name)
                    named[(d_i, a)] = (Frame("[jit]", a - 1, *lang[1:], lang[0]) if lang else
                                       Frame("[jit]", a - 1, name, None),)
                else:
                    named[(d_i, a)] = (Frame("", a, None, None),)
            elif skip is None or not skip(found[0]):
                wanted[found[0]].add(found[1])
    chains, why = symbolize(wanted) if wanted else ({}, [])
    if notes is not None:
        notes.extend(why)
    for ref, found in placed.items():
        if ref in named or found is None:
            continue
        path, key = found
        if skip is not None and skip(path):
            named[ref] = (Frame(path, key, os.path.basename(path), None),)
        else:
            named[ref] = resolve_chain(path, key, chains.get((path, key)))
    return named


# ---- which frame is the program's own --------------------------------------------------------------

# Source files that are a toolchain's or a runtime's, not the program's: C++'s and C's headers
# (inlined standard-library code), Go's standard library, the interpreters' own sources.
SYSTEM_SOURCES = re.compile(r"^(/usr/(include|lib|share|local/include|local/go|local/lib/go)/|<built-in>|<frozen |"
                            r"/usr/src/|/build/)|/go/src/(runtime|internal|sync|syscall|os|io|bufio|strings|bytes|"
                            r"fmt)/|/lib/python3\.\d+/|/site-packages/|^node:|^internal/")
# Functions that are a standard library's or a runtime's, whatever file they are in.
SYSTEM_FUNCTIONS = re.compile(r"^(std::|__gnu_cxx::|__cxxabiv1::|operator new|operator delete|runtime\.|"
                              r"internal/|sync\.|syscall\.|v8::|node::|Builtins_|uv_|_Py|Py[A-Z]|java\.|jdk\.|"
                              r"sun\.)")


# Functions of an interpreter or a VM that runs the program (not compiled into it, as Go's runtime
# is): a stack with one of them in an object makes all of that object's frames the runtime's.
INTERPRETER_FUNCTIONS = re.compile(r"^(v8::|node::|Builtins_|uv_|_Py|Py[A-Z]|JVM_|JNI_|Java_|os::|"
                                   r"Interpreter|CompileBroker::)")


INTERPRETER_OBJECTS = re.compile(r"(^|/)(libjvm\.so|libjli\.so|libpython3[\d.]*\.so[\d.]*|python3(\.\d+)?|node(js)?|java)$")


def is_program(f: Frame) -> bool:
    """Whether a named frame is the program's own code (not a library's, a toolchain's or a
    runtime's): a language frame outside the runtime's own scripts, or a native frame whose source
    and function are not a standard library's."""
    if f.function is None:
        return False
    if f.source and SYSTEM_SOURCES.search(f.source):
        return False
    return not SYSTEM_FUNCTIONS.search(f.function)


def frame_kind(f: Frame, runtime_object) -> str:
    """'program', 'runtime' or 'kernel': whose code a frame is, as a flame graph colours it."""
    if "[kernel" in (f.path or ""):
        return "kernel"
    if f.language:
        return "program" if is_program(f) else "runtime"
    own = (f.path and f.path != "[jit]" and not runtime_object(f.path) and not INTERPRETER_OBJECTS.search(f.path)
           and not (f.function and INTERPRETER_FUNCTIONS.match(f.function)) and is_program(f))
    return "program" if own else "runtime"


# memsleuth's own libraries in the explaining run (the heap accounting's interposer, the sampler): their
# frames in a stack are memsleuth's work, not the program's, and are left out.
OWN_OBJECTS = re.compile(r"(^|/)libms(heap|sites)\.so$")


def stack_entry(frames: list[Frame], runtime_object) -> tuple[tuple, ...]:
    """A stack as stored for flame graphs and profiles: outermost first, each frame (function,
    source file, line, kind); a frame with no symbol is named by its object. memsleuth's own frames
    (OWN_OBJECTS) are left out wherever they are: a heap profile's leaf is the program's call, and a
    call under malloc reads main -> __libc_malloc as it does without memsleuth, not through the
    accounting's interposer (a stack of nothing else keeps its outermost frame)."""
    kept = [f for f in frames if not OWN_OBJECTS.search(f.path or "")] or frames[-1:]
    return tuple(_entry_frame(f, runtime_object) for f in reversed(kept))


@functools.lru_cache(maxsize=1 << 16)   # the same frames come back in stack after stack (14,904 for a gcc check)
def _entry_frame(f: Frame, runtime_object) -> tuple:
    """One frame of stack_entry; `runtime_object` is part of the key (a reader's own test)."""
    name = short_name(f.function) if f.function and not f.language else f.function or f"[{f.object}]"
    line = f.line.rsplit(":", 1)[-1] if f.line else ""
    return (name, f.source or (f.line.rsplit(":", 1)[0] if f.line else "") or f.path,
            int(line) if line.isdigit() else 0, frame_kind(f, runtime_object))


def program_site(frames: list[Frame], runtime_object) -> tuple[Frame | None, Frame | None]:
    """(the program's own frame, the frame that made the call) of one stack, innermost first.
    The maker is the first frame outside the runtime's objects (`runtime_object(path)`: the C
    library, the loader, the allocator); the program's frame is the first frame in the program's
    own language (a runtime's perf map) or, failing that, the first frame from the maker outwards
    whose source and function are the program's (not an inlined standard-library frame, not Go's
    runtime). Either is None when no frame qualifies."""
    maker_i = next((i for i, f in enumerate(frames) if f.path and f.path != "[jit]" and not runtime_object(f.path)),
                   None)
    maker = frames[maker_i] if maker_i is not None else None
    lang = next((f for f in frames if f.language and is_program(f)), None)
    if lang is not None:
        return lang, maker
    interpreters = {f.path for f in frames if (f.function and INTERPRETER_FUNCTIONS.match(f.function))
                    or INTERPRETER_OBJECTS.search(f.path or "")}
    if maker is None or maker.path in interpreters:
        # an interpreter's own code, and no frame of the program's language within the stack
        return None, maker
    own = next((f for f in frames[maker_i:] if f.path != "[jit]" and not runtime_object(f.path)
                and f.path not in interpreters and is_program(f)), None)
    return own or maker, maker


def site_with_maker(own: Frame, maker: Frame | None) -> str:
    """'handle (server.cc:42) via std::string::basic_string (basic_string.h:659)', or the frame alone."""
    if maker is None or maker == own or maker.text() == own.text():
        return own.text()
    return f"{own.text()} via {maker.text()}"
