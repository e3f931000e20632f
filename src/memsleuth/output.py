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


def write_text(path: str, text: str, what: str) -> None:
    write_with(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"), what)


def write_with(path: str, writer: Callable[[str], None], what: str) -> None:
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
