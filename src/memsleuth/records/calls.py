"""Call chains with what frame pointers miss put back (x86-64 objects read for the calls).

A function that makes no frame (libc's memset and memcpy, Go's memmove) is skipped by a frame-pointer
chain taken inside it: ms-run keeps the word at the stack pointer, its return address, and `chain`
puts the caller back. A function that ends by jumping to another (a tail call: glibc's calloc ends in
`return memset(...)`) leaves no trace in any stack: the callee returns straight to the caller's
caller. There the instruction before that return address says which function was called (`callee`):
a direct call (its target, named by the object's symbols, or the import a PLT stub jumps through) or
an indirect one through the GOT (`-fno-plt`). What is not one of these is None."""
from __future__ import annotations

import functools
import mmap
import re
import struct
from dataclasses import dataclass

from memsleuth.records import symbols

SHT_SYMTAB, SHT_DYNSYM, SHT_RELA = 2, 11, 4
STT_FUNC = 2


@dataclass
class _Object:
    data: mmap.mmap
    loads: tuple[tuple[int, int, int], ...]     # PT_LOAD (file offset, address, file size)
    sections: list
    plt: tuple[tuple[int, int], ...]            # the PLT sections' (address, size)


def _sections(data: bytes):
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + k * shentsize) for k in range(shnum)]
    names_at = heads[shstrndx][4] if shstrndx < len(heads) else 0

    def name(h) -> str:
        end = data.find(b"\0", names_at + h[0])
        return data[names_at + h[0]:end].decode("ascii", "replace")
    return [(name(h), h) for h in heads]


def _name(data, strtab, st_name: int) -> str:
    """A symbol's name, from its offset in the string table (the section header `strtab`)."""
    start = strtab[4] + st_name
    return data[start:data.find(b"\0", start)].decode("utf-8", "replace")


@functools.lru_cache(maxsize=64)
def _object(path: str) -> _Object | None:
    try:
        with open(path, "rb") as f:
            data = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1 or struct.unpack_from("<H", data, 0x12)[0] != 62:
            return None          # 64-bit little-endian x86-64 only
        segments = symbols.elf(path)
        if segments is None:
            return None
        loads = segments.loads
        sections = _sections(data)
        plt = tuple((h[3], h[5]) for name, h in sections if name in (".plt", ".plt.sec", ".plt.got"))
        return _Object(data, loads, sections, plt)
    except (OSError, ValueError, struct.error, IndexError):
        return None


def _read(obj: _Object, address: int, n: int) -> bytes:
    for off, vaddr, size in obj.loads:
        if vaddr <= address and address + n <= vaddr + size:
            return bytes(obj.data[off + address - vaddr:off + address - vaddr + n])
    return b""


def _function_starting(obj: _Object, address: int) -> str | None:
    """The function whose first instruction is at `address`: a call's target is one (anything else was
    not a call rel32: the bytes before an indirect call through a register may look like one). The
    tables are searched for the address's bytes at an entry's st_value, not read whole: a check asks
    for a few targets, and node's binary has about 150,000 functions (0.2 s to read them all)."""
    if address <= 0:
        return None
    packed = struct.pack("<Q", address)
    for _, h in obj.sections:               # the first table's first function at the address
        if h[1] not in (SHT_SYMTAB, SHT_DYNSYM) or h[6] >= len(obj.sections):
            continue
        first, end, entsize = h[4], h[4] + h[5], h[9] or 24
        at = obj.data.find(packed, first, end)
        while at >= 0:
            if (at - first) % entsize == 8:    # st_value's offset in an entry
                st_name, info, _, _, _, size = struct.unpack_from("<IBBHQQ", obj.data, at - 8)
                if size and info & 0xF == STT_FUNC:
                    return _name(obj.data, obj.sections[h[6]][1], st_name)
            at = obj.data.find(packed, at + 1, end)
    return None


def _import_at(obj: _Object, slot: int) -> str | None:
    """The symbol the GOT slot at `slot` is bound to: the relocations (against the dynamic symbols)
    are searched for the slot's address at an entry's r_offset, not read whole (python3.12's binary:
    17,000 names, 40 ms of a check to read them all); relative ones bind no name."""
    packed = struct.pack("<Q", slot)
    for _, h in obj.sections:
        if h[1] != SHT_RELA or h[6] >= len(obj.sections) or obj.sections[h[6]][1][1] != SHT_DYNSYM:
            continue
        dynsym = obj.sections[h[6]][1]
        count, entsize = dynsym[5] // (dynsym[9] or 24), dynsym[9] or 24
        first, end, step = h[4], h[4] + h[5], h[9] or 24
        at = obj.data.find(packed, first, end)
        while at >= 0:
            if (at - first) % step == 0:          # r_offset's place in an entry
                index = struct.unpack_from("<Q", obj.data, at + 8)[0] >> 32
                if 0 < index < count:
                    bound = _name(obj.data, obj.sections[dynsym[6]][1],
                                  struct.unpack_from("<I", obj.data, dynsym[4] + index * entsize)[0])
                    if bound:
                        return bound
            at = obj.data.find(packed, at + 1, end)
    return None


@functools.lru_cache(maxsize=4096)
def callee(path: str, ret: int) -> tuple[str, bool] | None:
    """The function the call instruction just before `ret` (an address in the object's terms)
    called, and whether it is the object's own (else an import, bound in another object), or None
    where it is not a call this can read."""
    obj = _object(path)
    if obj is None:
        return None
    try:
        before = _read(obj, ret - 6, 6)
        if len(before) != 6:
            return None
        if before[1] == 0xE8:                              # call rel32
            target = ret + struct.unpack_from("<i", before, 2)[0]
        elif before[0:2] == b"\xff\x15":                  # call *rel32(%rip): through the GOT (-fno-plt)
            name = _import_at(obj, ret + struct.unpack_from("<i", before, 2)[0])
            return (name, False) if name else None
        else:
            return None
        if any(a <= target < a + size for a, size in obj.plt):
            stub = _read(obj, target, 16)
            at = stub.find(b"\xff\x25")                    # the stub's jmp *rel32(%rip) through its slot
            if at < 0 or at + 6 > len(stub):
                return None
            name = _import_at(obj, target + at + 6 + struct.unpack_from("<i", stub, at + 2)[0])
            return (name, False) if name else None
        name = _function_starting(obj, target)
        return (name, True) if name else None
    except (ValueError, struct.error):
        return None


# libc's string and memory functions: hand-written, they make no frame, so a frame-pointer chain taken
# in one skips its caller (calloc's memset reads as memset <- calloc's caller); ms-run keeps the word
# at the stack pointer, their return address, and the chain gets the caller back from it.
# Go's assembly for the same (a frame of size 0: no frame pointer saved) are named wherever Go's runtime
# is linked in: growslice's copy, mallocgc's clearing.
FRAMELESS_LEAVES = re.compile(r"^_*(mem|str|stp|wmem|wcs|bzero|bcmp|explicit_bzero)\w*$")
LIBC_OBJECTS = re.compile(r"^(libc\.so(\.\d+)?|libc\.musl-[\w.-]+|ld-musl-[\w.-]+)$")
GO_FRAMELESS = re.compile(r"^runtime\.(memmove|memclrNoHeapPointers)$")


def _frameless(f: symbols.Frame) -> bool:
    return bool(f.function and (FRAMELESS_LEAVES.match(f.function) and LIBC_OBJECTS.match(f.object)
                                or GO_FRAMELESS.match(f.function)))


def chain(named: dict[tuple[int, int], tuple[symbols.Frame, ...]], d_i: int, addresses: list, ret: int = 0) \
        -> list[symbols.Frame]:
    """The frames of one sampled chain of document `d_i` (its addresses innermost first, named by
    `symbols.resolve`), with the caller of a frameless libc leaf put back from `ret`, the return address
    ms-run read at the stack pointer, where it names another function than the chain's next frame;
    and where that caller's call went to another function, which ended by jumping to the leaf (glibc's
    calloc to memset: a tail call), that function between the two."""
    groups = [named.get((d_i, a), ()) for a in addresses]
    if not (ret and groups and groups[0]):
        return [f for g in groups for f in g]
    leaf = groups[0][-1]
    caller = named.get((d_i, ret), ())
    after = groups[1][-1].function if len(groups) > 1 and groups[1] else None
    if _frameless(leaf) and caller and caller[-1].function and caller[-1].function != after:
        groups.insert(1, caller)
        if caller[-1].path:
            called = callee(caller[-1].path, caller[-1].offset + 1)
            if called and called[0] != leaf.function and not FRAMELESS_LEAVES.match(called[0]):
                groups.insert(1, (symbols.Frame(caller[-1].path if called[1] else leaf.path, 0, called[0], None),))
    return [f for g in groups for f in g]
