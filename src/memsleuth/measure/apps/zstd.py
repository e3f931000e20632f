"""A multi-threaded compressor: zstd with two worker threads at level 17 on the same 3 MiB of
text-like data, and back (per-thread contexts and job buffers, allocated and freed across threads).
The check: the round trip gives back the input byte for byte."""
from __future__ import annotations

from pathlib import Path

from memsleuth.measure.apps.base import DONE, START, App
from memsleuth.measure.apps.xz import prepare     # the same data as xz


def script(folder: Path) -> str:
    d = f"'{folder}/data.txt'"
    return f"{START}; zstd -q -T2 -17 -c {d} | zstd -q -dc | cmp -s - {d}; {DONE}"


APP = App("zstd-mt", "a multi-threaded compressor: per-thread contexts, job buffers passed between threads",
          ("zstd", "cmp"), ("zstd", "diffutils"), script, prepare)
