"""A compression tool: xz (LZMA2, one thread) compressing 3 MiB of text-like data at level 6 and
decompressing it again (large match-finder tables, allocated once per stream). The check: the
round trip gives back the input byte for byte."""
from __future__ import annotations

import random
from pathlib import Path

from memsleuth.measure.apps.base import DONE, START, App

SIZE = 3 << 20


def text_like(path: Path, size: int, seed: int = 1) -> None:
    """Words from a fixed vocabulary, seeded: compressible like text, the same every time."""
    rnd = random.Random(seed)
    words = ["".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(2, 9))) for _ in range(4000)]
    out, n = [], 0
    while n < size:
        line = " ".join(rnd.choice(words) for _ in range(12)) + "\n"
        out.append(line)
        n += len(line)
    path.write_text("".join(out)[:size])


def prepare(folder: Path) -> None:
    if not (folder / "data.txt").exists():
        text_like(folder / "data.txt", SIZE)


def script(folder: Path) -> str:
    d = f"'{folder}/data.txt'"
    return f"{START}; xz -T1 -6 -c {d} | xz -dc | cmp -s - {d}; {DONE}"


APP = App("xz", "a compression tool: LZMA2 match finders, large buffers allocated per stream",
          ("xz", "cmp"), ("xz-utils", "diffutils"), script, prepare)
