"""Issue 11: `check` explains unmodified programs from outside. Plain C programs (no probe, not
preloaded, native/fixtures/plain/) with one textbook pathology each are named by the right
finding; clean programs get no mechanism finding."""
from __future__ import annotations

import json
import re
import shutil

import pytest

from memsleuth.measure import allocators
from conftest import fixture, memsleuth, needs_tracepoints

# Findings about the measurement or the machine, not about a mechanism in the program.
NOT_MECHANISMS = {"unstable-measurement", "counters-unavailable"}


def check(tmp_path, *cmd: str, env: list[str] = ()) -> dict:
    js = tmp_path / "c.json"
    args = ["check", "--db", str(tmp_path / "c.db"), "--json", str(js)]
    for e in env:
        args += ["--env", e]
    proc = memsleuth(*args, "--", *cmd)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(js.read_text())
    doc["_stdout"] = proc.stdout
    return doc


def found(doc: dict) -> dict[str, dict]:
    return {f["id"]: f for c in doc["cells"] for f in c["summary"]["findings"]} | \
        {f["id"]: f for f in doc["findings"]}


def mechanisms(doc: dict) -> set[str]:
    return set(found(doc)) - NOT_MECHANISMS


@needs_tracepoints
def test_seed_000_loop_is_heap_top_trimming_with_the_breaks_moves(tmp_path):
    doc = check(tmp_path, fixture("plain-steps"), "30")
    f = found(doc)["heap-trim-churn"]
    moves = f["numbers"]["brk_down_moves"]
    assert moves >= 25  # one trim per step
    assert any("moved down" in e and "times by" in e for e in f["evidence"])
    assert f["calls"] == "brk"


needs_perf = pytest.mark.skipif(shutil.which("perf") is None, reason="perf is not installed (linux-perf)")


@needs_tracepoints
@needs_perf
def test_seed_000_call_sites_name_the_free_line_and_the_refaulting_line(tmp_path):
    doc = check(tmp_path, fixture("plain-steps"), "20")
    f = found(doc)["heap-trim-churn"]
    sites = " ".join(f["call_sites"])
    assert "steps.c:18" in sites, sites          # free(): the trim, through systrim
    assert "systrim" in sites
    assert "steps.c:15" in sites, sites          # memset: the re-faulting line
    assert f["who"] == "allocator"               # the brk calls come through malloc/free


@needs_tracepoints
def test_fixed_mmap_threshold_is_mmap_churn(tmp_path):
    doc = check(tmp_path, fixture("plain-bigbuf"), "2000", env=["GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072"])
    f = found(doc)["mmap-churn"]
    assert f["numbers"]["munmap"] >= 2000 and f["numbers"]["unmapped_bytes"] >= 2000 * (1 << 20)


@needs_tracepoints
def test_contended_program_mutex_is_lock_contention_without_blaming_malloc(tmp_path):
    doc = check(tmp_path, fixture("plain-mutex"), "500000")
    f = found(doc)["lock-contention"]
    assert "allocator" not in f["title"].lower()
    assert f["numbers"]["futex"] >= 1000


@needs_tracepoints
def test_a_vector_doubled_and_freed_every_round_is_mmap_churn_not_its_growth(tmp_path):
    """A vector doubled to 32 MiB by realloc (mremap past the threshold) and freed, 30 rounds: its faults
    are each round's fresh mapping (free unmaps it, the next round maps another), so mmap churn is the
    mechanism and the advice is to keep the buffer; its growth is not (made with one 32 MiB malloc per
    round instead, no mremap, the program ran 0.45 -> 0.44 s here). It read "Realloc growth churn"
    while ms-run kept each move's old place as a mapping of its own: the faults made before a move
    then never read as given back."""
    doc = check(tmp_path, fixture("plain-vector"), "30")
    timed = [f for f in doc["cells"][0]["summary"]["findings"] if f.get("cost_share")]
    assert timed and timed[0]["id"] == "mmap-churn", [(f["id"], f["cost_share"]) for f in timed]
    assert timed[0]["numbers"]["munmap"] >= 30
    assert "reuse the buffers" in timed[0]["advice"], timed[0]["advice"]


@needs_tracepoints
def test_program_pool_that_madvises_is_a_madvise_storm_with_its_advice(tmp_path):
    doc = check(tmp_path, fixture("plain-madvise_pool"), "100000")
    f = found(doc)["madvise-storm"]
    assert any("MADV_DONTNEED" in e for e in f["evidence"])


def test_leak_is_the_live_heap_growing_not_only_resident_growth(tmp_path):
    """1 MiB allocated every 4 ms and never freed: resident memory grows to the end, and the heap
    accounting shows it is live heap, with its site; rss-growth ("this run does not show which")
    steps aside for it (findings.SUPERSEDED_BY)."""
    doc = check(tmp_path, fixture("plain-leak"), "250")
    f = found(doc)
    assert "heap-leak" in f and "rss-growth" not in f, list(f)
    assert f["heap-leak"]["numbers"]["sites"][0].startswith("main (leak.c:"), f["heap-leak"]["numbers"]


def test_big_first_touch_is_named(tmp_path):
    doc = check(tmp_path, fixture("plain-bigtouch"), "256")
    assert "first-touch" in found(doc)


def test_kernel_time_is_never_silent(tmp_path):
    # Faults in a loop that no mechanism rule names (small mappings touched and unmapped): the
    # kernel's share is still explained by counts.
    script = ("import mmap\nfor i in range(20000):\n m = mmap.mmap(-1, 1 << 16)\n m[::4096] = b'x' * 16\n m.close()")
    doc = check(tmp_path, "python3", "-c", script)
    ids = mechanisms(doc)
    assert ids, "a program that spends its time in the kernel must get a finding"
    if "kernel-time" in ids:
        f = found(doc)["kernel-time"]
        assert any("page faults" in e for e in f["evidence"])


@pytest.mark.parametrize("cmd", [
    [fixture("plain-cpu"), "50000000"],
    ["python3", "-c", "import json; print(sum(len(json.dumps(list(range(100)))) for _ in range(2000)))"],
    ["sh", "-c", "seq 1 200000 | sort -r > /dev/null"],
    ["sh", "-c", "head -c 20000000 /dev/zero | gzip -c > /dev/null"],
])
def test_clean_programs_get_no_mechanism_finding_above_low(tmp_path, cmd):
    """None above low, as issue 42 asks of clean programs. A low one can be true: where python3 is a
    pyenv shim (a bash script that runs about 40 processes first), their start-up's file-backed faults
    read 5.6% [4%, 7%] of a 0.36 s run once in three here, and crossed 5% beside two busy loops."""
    if cmd[0] == "sh" and "gzip" in cmd[2] and not shutil.which("gzip"):
        pytest.skip("gzip not installed")
    doc = check(tmp_path, *cmd)
    # (mechanisms() gives ids: iterating it as findings ended in a TypeError whenever a low one was there)
    loud = [(i, f["confidence"], f["evidence"]) for i, f in found(doc).items()
            if i in mechanisms(doc) and f["confidence"] != "low"]
    assert not loud, loud


@needs_tracepoints
def test_compare_says_who_makes_the_calls(tmp_path):
    other = next((a for a in allocators.available() if a.name == "mimalloc"), None)
    if other is None:
        pytest.skip("mimalloc not installed")
    js = tmp_path / "w.json"
    # the timed rounds count no syscall: two warm-ups per allocator count them, and give their spread
    proc = memsleuth("compare", "--alloc", "glibc,mimalloc", "--reps", "2", "--warmup", "2", "--db",
                     str(tmp_path / "w.db"), "--json", str(js), "--", fixture("plain-madvise_pool"), "100000")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(js.read_text())
    storms = [f for c in doc["cells"] for f in c["summary"]["findings"] if f["id"] == "madvise-storm"]
    assert storms and all(f["who"] == "program" for f in storms)
    assert all("MALLOC" not in f["advice"] and "trim_threshold" not in f["advice"] for f in storms)
    assert "who makes the calls: the program" in proc.stdout
    # one warm-up each: one count per allocator, no spread; the counts decide nothing, and say why
    js1 = tmp_path / "w1.json"
    proc = memsleuth("compare", "--alloc", "glibc,mimalloc", "--reps", "2", "--db", str(tmp_path / "w1.db"),
                     "--json", str(js1), "--", fixture("plain-madvise_pool"), "100000")
    assert proc.returncode == 0, proc.stderr
    storms = [f for c in json.loads(js1.read_text())["cells"] for f in c["summary"]["findings"]
              if f["id"] == "madvise-storm"]
    assert storms and all(f["who"] == "undetermined" and "--warmup 2" in f["who_why"] for f in storms)


def test_a_slower_allocator_on_any_command_gets_a_kernel_finding(tmp_path):
    js = tmp_path / "k.json"
    md = tmp_path / "k.md"
    proc = memsleuth("compare", "--alloc", f"glibc,storm={fixture('libfx-madvise_free.so')}", "--reps", "6",
                     "--db", str(tmp_path / "k.db"), "--json", str(js), "--md", str(md), "--",
                     "python3", "-c", "x = [bytearray(64) for _ in range(300000)]; del x")
    assert proc.returncode == 0, proc.stderr
    # The evidence table marks where the cells differ: storm's madvise count against glibc's none.
    evidence = md.read_text().split("## Evidence", 1)[1]
    storm_row = next(line for line in evidence.splitlines() if line.startswith("| storm |"))
    assert re.search(r"\| _[\d,]+_ \|", storm_row), storm_row
    doc = json.loads(js.read_text())
    storm = next(c for c in doc["cells"] if c["allocator"]["name"] == "storm")
    if storm["summary"]["verdict"] and "slower" in storm["summary"]["verdict"]:
        ids = {f["id"] for f in storm["summary"]["comparison_findings"] + storm["summary"]["findings"]}
        assert ids & {"kernel-gap", "madvise-storm"}, ids


@needs_perf
def test_a_stripped_program_is_named_by_object_and_address(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))    # no frame of it named before
    stripped = tmp_path / "steps-stripped"
    shutil.copy(fixture("plain-steps"), stripped)
    import subprocess
    if subprocess.run(["strip", str(stripped)]).returncode != 0:
        pytest.skip("strip not available")
    doc = check(tmp_path, str(stripped), "20")
    sites = " ".join(line for c in doc["cells"] for f in c["summary"]["findings"] for line in f.get("call_sites", []))
    assert "an address in steps-stripped at offset 0x" in sites and "(no symbols: stripped?)" in sites, sites
    assert "steps.c:" not in sites
    # Once its unstripped build has been named, the same code (the same build id) is named from
    # the symbols cache, as perf's build-id cache does.
    check(tmp_path, fixture("plain-steps"), "20")
    doc = check(tmp_path, str(stripped), "20")
    sites = " ".join(line for c in doc["cells"] for f in c["summary"]["findings"] for line in f.get("call_sites", []))
    assert "steps.c:" in sites, sites


def test_a_run_killed_by_its_timeout_keeps_its_timeline(tmp_path):
    js = tmp_path / "t.json"
    # the program runs 4 s alone; killed at 1.5 s. The timeline's rows (one per 10 ms where the sampler got
    # the CPU: beside two busy loops and a loaded suite it kept 13 in 0.5 s) reach the second half of it.
    proc = memsleuth("check", "--no-where", "--timeout", "1.5", "--db", str(tmp_path / "t.db"), "--json", str(js),
                     "--", fixture("plain-leak"), "1000")
    assert proc.returncode == 3, proc.stderr
    sample = json.loads(js.read_text())["cells"][0]["samples"][0]
    assert sample["status"] == "timeout"
    rows = sample["timeline"]["rows"]
    assert len(rows) >= 10 and rows[-1][0] >= 750, rows[-3:]


def test_without_perf_call_sites_say_what_is_missing(monkeypatch):
    from memsleuth.measure import where
    from memsleuth.records import sites
    monkeypatch.setattr(where, "perf_path", lambda: None)
    got = where.record(["true"], {}, None, {"page-faults": 100}, 10)
    assert "perf is not installed" in got["unavailable"]
    assert "perf is not installed" in sites.lines_for(sites.CallSites.from_dict(got), "brk")[0]


def test_a_process_tree_names_its_commands(tmp_path):
    # sh starts the step loop: the whole tree is measured and named.
    doc = check(tmp_path, "sh", "-c", f"{fixture('plain-steps')} 10; true")
    assert doc["cells"][0]["samples"][0]["status"] == "ok"
    assert "heap-trim-churn" in found(doc) or "kernel-time" in found(doc)
    # the explaining run's own libraries map nothing large in any process of the tree (a 33 MiB probe
    # per process once read as the program's "blocks of 32 to 64 MiB")
    explained = [s for s in doc["cells"][0]["samples"] if s.get("heap") and s.get("syscall_args")]
    assert explained
    for call in ("mmap", "munmap"):
        sizes = (explained[0]["syscall_args"].get(call) or {}).get("sizes") or []
        assert not [c for c in sizes if c[0] >= 32 << 20], (call, sizes)


def test_check_says_where_its_own_time_went(tmp_path):
    js = tmp_path / "v.json"
    proc = memsleuth("check", "--verbose", "--db", str(tmp_path / "v.db"), "--json", str(js), "--",
                     fixture("plain-steps"), "5")
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stderr.splitlines() if "where this command's time went" in x)
    timings = json.loads(js.read_text())["timings"]
    assert list(timings)[:2] == ["measured runs", "explaining runs"], timings
    assert {"analysis and report", "terminal output"} <= set(timings) and all(v >= 0 for v in timings.values())
    assert all(name in line for name in timings), (line, timings)
