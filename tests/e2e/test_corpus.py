"""The rule corpus (issue 20): unmodified programs, each with its true mechanism, culprit and words,
run end to end through `memsleuth check` on real processes. Each entry says what the finding must
be (its id, words its title or mechanism must hold, who makes the calls) and what it must never say
(words that would contradict the program's true behaviour). Clean programs must get no mechanism
finding above low confidence, and the one line that says nothing material was found.

The programs are native/fixtures/plain/*.c and interpreter one-liners; the expectations come from
what each program does, not from what memsleuth printed."""
from __future__ import annotations

import json
import sys

import pytest

from conftest import ROOT, fixture, memsleuth, needs_tracepoints

MEASUREMENT = {"unstable-measurement", "counters-unavailable"}


def check(tmp_path, *cmd: str, cwd: str | None = None) -> dict:
    js = tmp_path / "c.json"
    proc = memsleuth("check", "--db", str(tmp_path / "c.db"), "--json", str(js), "--", *cmd, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(js.read_text())
    doc["_stdout"] = proc.stdout
    return doc


def mechanisms(doc: dict) -> list[dict]:
    found = [f for c in doc["cells"] for f in c["summary"]["findings"]] + doc["findings"]
    return [f for f in found if f["id"] not in MEASUREMENT]


CASES = [
    # (name, command, expected id, words in title+mechanism, who, words that must not appear)
    ("own pool purging with MADV_DONTNEED", ["plain-madvise_pool"], "madvise-storm", ["purge", "MADV_DONTNEED"],
     "program", []),
    ("prefaulting with MADV_POPULATE_WRITE", ["plain-madv_populate"], "madvise-calls", ["populated", "POPULATE"],
     "program", ["purg", "storm"]),
    ("the program's own break and MADV_MERGEABLE", ["plain-sbrk_merge"], "heap-trim-churn",
     ["program break", "down a page or two"], "program", ["purg"]),
    ("1 MiB blocks mapped, rarely touched, unmapped", ["plain-mmap_once"], "mmap-churn",
     ["mmap", "the calls themselves"], "program", []),
    # One buffer moved by mremap thousands of times and freed once: no mmap churn (2 munmap calls read as
    # "a file is mapped and unmapped again and again" while ms-run kept each move's old place).
    ("realloc one byte at a time to 64 MiB", ["plain-realloc_byte"], "mremap-churn", ["mremap"], "allocator",
     ["mmap/munmap churn"]),
    # A table doubled by malloc, copy and free (a C++ vector, a CPython dict): each new table is larger than
    # any given back, so its faults are first touches; they read as 82% mmap churn, which no allocator
    # option saves (glibc keeping the blocks: 131,134 -> 131,121 faults).
    ("a table grown by doubling, its old copies freed", ["plain-table_grow"], "first-touch", ["fresh memory"], None,
     ["faulted in again"]),
    # Its sizes vary (1-5 MiB at random), so a mapping is often larger than the last one given back: still
    # churn (ms-run counts a mapping as reuse where it is no larger than one given back and still pending).
    ("a mapping per request of its own size", ["plain-map_sizes"], "mmap-churn", ["faulted in again"], "program",
     ["First-touch"]),
    ("512 MiB of calloc only read", ["plain-calloc_read"], "zero-page-read", ["zero page"], None, ["first touch"]),
    ("seed 000's loop, unmodified", ["plain-steps"], "heap-trim-churn", ["moving down and up"], "allocator",
     ["purg"]),
    ("a big buffer first touched", ["plain-bigtouch", "256"], "first-touch", ["first"], None, []),
    ("a buffer per request mapped with MAP_POPULATE", ["plain-populate", "200"], "mmap-churn",
     ["MAP_POPULATE", "inside the call"], "program", []),
    ("an interpreter building 1 GiB of objects", [sys.executable, "-c", "x = [bytes(1000) for _ in range(10**6)]"],
     "first-touch", ["faulted in"], None, ["purg", "leak"]),
]


@needs_tracepoints
@pytest.mark.parametrize("name,cmd,expected,words,who,never", CASES, ids=[c[0] for c in CASES])
def test_the_right_mechanism_in_the_right_words(tmp_path, name, cmd, expected, words, who, never):
    argv = [fixture(cmd[0]) if cmd[0].startswith("plain-") else cmd[0], *cmd[1:]]
    doc = check(tmp_path, *argv)
    found = mechanisms(doc)
    by_id = {f["id"]: f for f in found}
    assert expected in by_id, [(f["id"], f["title"]) for f in found]
    f = by_id[expected]
    text = f["title"] + " " + f["mechanism"]
    for w in words:
        assert w.lower() in text.lower(), (w, text)
    for f2 in found:   # no finding about this program may say what it does not do
        for w in never:
            assert w.lower() not in (f2["title"] + " " + f2["mechanism"]).lower(), (w, f2["id"], f2["title"])
    if who is not None:
        assert f["who"] == who, (f["who"], f["evidence"])
    # Costed, ordered by cost, and every sentence quoting a cost within the CPU time it had.
    assert f["cost_share"] is not None and 0 < f["cost_share"] <= 1.0
    shares = [x["cost_share"] or 0 for x in found if x["id"] not in ("rss-growth", "rss-blowup")]
    assert shares == sorted(shares, reverse=True)


@pytest.mark.parametrize("cmd", [
    # an interpreter computing on small ints (CPython's cached -5..256: no object allocated per step).
    # A sum of squares is not clean: its big ints take CPython's allocator 22% of the CPU (perf:
    # _PyObject_Malloc 13.6%, _PyObject_Free 8.7%), which allocator-time reports.
    [sys.executable, "-c",
     "import itertools\nx = 0\nfor _ in itertools.repeat(None, 6 * 10**6): x = (x + 3) & 127\nprint(x)"],
    ["sh", "-c", "seq 1 200000 | sort -r > /dev/null"],
    # a compiler run: cc1's own garbage-collected heap is its mappings, never "not in live malloc blocks"
    ["gcc", "-O2", "-g", "-c", str(ROOT / "native/launcher/msr_cpu.c"), f"-I{ROOT}/native/include",
     f"-I{ROOT}/native/probe", f"-I{ROOT}/native/launcher", "-o", "/dev/null"],
])
def test_clean_programs_get_the_nothing_material_line(tmp_path, cmd):
    doc = check(tmp_path, *cmd)
    found = mechanisms(doc)
    assert all(f["confidence"] == "low" for f in found), [(f["id"], f["confidence"], f["title"]) for f in found]
    if not found:
        line = doc["no_material_cost"]
        assert line and ("No memory mechanism costs 5%" in line or "No finding names a memory mechanism" in line)
        assert line.split(":")[0].split(",")[0] in doc["_stdout"].replace("\n", " ")
