"""Writing report and export files: all or nothing.

A file is written beside its destination under a temporary name, flushed to disk, then renamed
over it; a failure (disk full, permission) removes the temporary file, leaves any earlier file
of that name as it was, and ends the command with exit code 4.
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Callable

from memsleuth.errors import StoreError


SQLITE_HEADER = b"SQLite format 3\x00"


def unsafe_destination(path: str) -> str | None:
    """Why a report or export must not be written at `path`, or None: an existing file that is not
    a regular file (a FIFO would hang, a device would be written to) or that is a SQLite database
    (the store: `--md memsleuth.db` would replace every run with a report)."""
    import stat
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        return e.strerror or str(e)
    if stat.S_ISDIR(st.st_mode):
        return None   # said as "is a directory" by the caller's own checks
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file (a FIFO, a device or a socket): refused"
    try:
        with open(path, "rb") as f:
            if f.read(len(SQLITE_HEADER)) == SQLITE_HEADER:
                return "is a SQLite database (a store?): refused, it would be replaced by the report"
    except OSError:
        pass
    return None


def write_text(path: str, text: str, what: str) -> None:
    # Bytes that were not UTF-8 (an argv or a program's output kept with surrogateescape) are
    # written as U+FFFD rather than failing the whole file.
    from memsleuth.textsafe import clean_bytes
    write_with(path, lambda tmp: Path(tmp).write_text(clean_bytes(text), encoding="utf-8"), what)


def write_with(path: str, writer: Callable[[str], None], what: str) -> None:
    why = unsafe_destination(path)
    if why:
        raise StoreError(f"cannot write {what} {path}: {why}; nothing was written there")
    dest = Path(path)
    parent = dest.parent if str(dest.parent) else Path(".")
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=parent)
        os.close(fd)
        writer(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        # mkstemp makes the file private; a report gets the mode any new file would get.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, dest)
        tmp = None
    except OSError as e:
        raise StoreError(f"cannot write {what} {path}: {e.strerror or e}; nothing was written there") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def say_written(what: str, path: str) -> None:
    print(f"memsleuth: {what} written to {path}", file=sys.stderr)
