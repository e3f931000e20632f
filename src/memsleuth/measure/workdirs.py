"""memsleuth's temporary folders: each named for the process that made it (memsleuth-KIND-PID-...),
so that one a killed memsleuth could not remove (SIGKILL in an attached window left 32 MB) is
removed by the next memsleuth of the same user. Another user's folders, and a running memsleuth's,
are never touched."""
from __future__ import annotations

import os
import re
import shutil
import tempfile

_LEFT = re.compile(r"^memsleuth-[a-z]+-(\d+)-")
_swept = False


def sweep() -> list[str]:
    """Removes this user's memsleuth folders whose process no longer runs; the paths removed."""
    gone = []
    try:
        entries = list(os.scandir(tempfile.gettempdir()))
    except OSError:
        return gone
    for e in entries:
        m = _LEFT.match(e.name)
        try:
            if not m or not e.is_dir(follow_symlinks=False) or e.stat(follow_symlinks=False).st_uid != os.geteuid():
                continue
        except OSError:
            continue
        if int(m.group(1)) != os.getpid() and not os.path.exists(f"/proc/{m.group(1)}"):
            shutil.rmtree(e.path, ignore_errors=True)
            gone.append(e.path)
    return gone


def workdir(kind: str) -> tempfile.TemporaryDirectory:
    """A temporary folder for one run's files, removed when done (and by the next memsleuth if this
    one is killed first)."""
    global _swept
    if not _swept:
        _swept = True
        sweep()
    return tempfile.TemporaryDirectory(prefix=f"memsleuth-{kind}-{os.getpid()}-")
