"""glibc tunables: GLIBC_TUNABLES is checked before anything runs, since glibc ignores a name it
does not know, or a value out of range, without a word, and a run would then measure the defaults.

The names and ranges come from the dynamic loader itself (`ld.so --list-tunables`, glibc 2.33 and
later); where it cannot list them, only the syntax is checked.
"""
from __future__ import annotations

import difflib
import glob
import re
import subprocess
from functools import lru_cache

from memsleuth.errors import UsageError

_LINE = re.compile(r"^(glibc\.[\w.]+):\s*(\S*)\s*(?:\(min:\s*(\S+),\s*max:\s*(\S+)\))?")
_LOADERS = ("/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1", "/lib64/ld-linux-aarch64.so.1")


@lru_cache(maxsize=1)
def known() -> dict[str, tuple[int, int] | None] | None:
    """tunable name -> (min, max) (None for a text-valued one like glibc.cpu.hwcaps), or None when
    the loader cannot list them."""
    for loader in (*_LOADERS, *sorted(glob.glob("/lib*/ld-linux*.so*"))):
        try:
            out = subprocess.run([loader, "--list-tunables"], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            continue
        found = {}
        for line in out.stdout.splitlines():
            m = _LINE.match(line.strip())
            if m:
                try:
                    found[m.group(1)] = (int(m.group(3), 0), int(m.group(4), 0)) if m.group(3) else None
                except ValueError:
                    found[m.group(1)] = None
        if found:
            return found
    return None


_DIGITS = {8: "01234567", 10: "0123456789", 16: "0123456789abcdefABCDEF"}


def glibc_number(text: str) -> tuple[int | None, str]:
    """A tunable's number as glibc's loader reads it (_dl_strtoul): ASCII digits only, 0x for hex
    and a leading 0 for octal (so 010 is 8); reading stops at the first other character. Returns
    (the number, or None when no digit was read; the rest glibc does not read)."""
    if text[:2] in ("0x", "0X"):
        base, body = 16, text[2:]
    elif text[:1] == "0" and len(text) > 1:
        base, body = 8, text[1:]
    else:
        base, body = 10, text
    n = 0
    while n < len(body) and body[n] in _DIGITS[base]:
        n += 1
    if n == 0:
        return (0, body) if base == 8 else (None, text)   # "0" followed by a non-octal character
    return int(body[:n], base), body[n:]


def validate(value: str) -> None:
    """Raises UsageError for a GLIBC_TUNABLES value glibc would silently ignore in part."""
    if not value:
        raise UsageError("GLIBC_TUNABLES is empty")
    table = known()
    for item in value.split(":"):
        name, sep, text = item.partition("=")
        if not sep or not name or not text:
            raise UsageError(f"GLIBC_TUNABLES {value!r}: {item!r} is not NAME=VALUE "
                             "(like glibc.malloc.arena_max=1; several joined by ':')")
        if not name.startswith("glibc."):
            raise UsageError(f"GLIBC_TUNABLES: {name!r} is not a glibc tunable (they are named glibc.*)")
        if table is None:
            continue
        if name not in table:
            close = difflib.get_close_matches(name, list(table), n=1)
            hint = f" (did you mean {close[0]}?)" if close else " (`ld.so --list-tunables` lists them)"
            raise UsageError(f"GLIBC_TUNABLES: unknown tunable {name!r}{hint}")
        if table[name] is None:
            continue
        number, rest = glibc_number(text)
        if number is None:
            raise UsageError(f"GLIBC_TUNABLES: {name} must be a number, got {text!r}")
        if rest:
            raise UsageError(f"GLIBC_TUNABLES: {name}={text}: glibc would read {number} and ignore {rest!r}; give "
                             "the number alone (decimal, 0x hex, or 0 octal)")
        lo, hi = table[name]
        if not lo <= number <= hi:
            raise UsageError(f"GLIBC_TUNABLES: {name}={text} is outside [{lo}, {hi}], and glibc would ignore it")
