"""Text from outside (a program's stderr, argv, names, host names, environment values) made safe
to show on a terminal: control characters made visible, never interpreted.

rich's Text strips BEL but passes ESC through, so a measured program's stderr holding `ESC[2J`
cleared the screen mid-report, and an OSC 8 sequence made a hyperlink. Every terminal string that
may hold outside text goes through `visible` (the terminal renderer applies it to everything it
prints); the other formats have their own escaping (Markdown, HTML autoescape, CSV).
"""
from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls, and lone surrogates (bytes that were not
# UTF-8, kept by Python's surrogateescape), plus the bidirectional overrides that reorder text.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]")


def _show(m: re.Match) -> str:
    c = ord(m.group(0))
    if 0xDC80 <= c <= 0xDCFF:           # surrogateescape: the original byte
        return f"\\x{c - 0xDC00:02x}"
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def visible(text) -> str:
    """The text with every control character shown as an escape (`\\x1b`), never sent raw."""
    return _UNSAFE.sub(_show, str(text))


# A name that came from a process (a function, a file, a command) is cut here: a program can name a
# function with a million characters, and every report, the store and each flame graph would carry it.
MAX_NAME = 500


def data_text(text, limit: int = MAX_NAME) -> str:
    """A name that came from a process, as memsleuth keeps and shows it: control and bidirectional
    characters (and bytes that were not UTF-8) as escapes, cut to `limit` characters with the cut said."""
    s = visible(text)
    return s if len(s) <= limit else s[:limit] + f"…[{len(s) - limit:,} more characters]"


def safe_text(text, style: str = ""):
    """A rich Text of outside text: made visible, never parsed as markup (rich imported here: the CLI's
    --help and its one-line errors need `visible` only)."""
    from rich.text import Text
    return Text(visible(text), style=style)


def clean_bytes(text: str) -> str:
    """A string safe to encode as UTF-8 (for files and the store's plain text), losslessly: bytes
    that were not UTF-8 (surrogateescape) written as `\\xff`, other lone surrogates as `\\udcxx`;
    never a UnicodeEncodeError."""
    return _SURROGATE.sub(_show, text)


_SURROGATE = re.compile("[\ud800-\udfff]")
