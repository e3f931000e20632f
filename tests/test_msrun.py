"""ms-run on real processes: every status, the preload check, output capture, inheritance."""
from __future__ import annotations

import time

from memsleuth import allocators
from conftest import fixture, ms_run, needs_pmu, regions_of


def test_segfault_is_crashed_with_signal_and_stderr_tail():
    doc = ms_run("--", fixture("fx-segv"))
    assert doc["status"] == "crashed"
    assert doc["signal"] == 11 and doc["signal_name"] == "SEGV"
    assert "writing through a null pointer" in doc["stderr_tail"]
    assert "about to crash" in doc["stdout_tail"]


def test_unbounded_allocation_under_a_memory_cap_is_oom():
    cap = 128 << 20
    doc = ms_run("--mem-limit", str(cap), "--timeout", "60", "--", fixture("fx-hog"))
    assert doc["status"] == "oom", doc["detail"]
    assert doc["mem_limit_bytes"] == cap
    assert doc["maxrss_kb"] * 1024 > cap * 0.9


def test_sleeping_past_the_timeout_is_timeout():
    t0 = time.monotonic()
    doc = ms_run("--timeout", "0.5", "--", fixture("fx-sleeper"))
    assert doc["status"] == "timeout"
    assert 0.4e9 < doc["wall_ns"] < 5e9
    assert time.monotonic() - t0 < 10


def test_library_without_malloc_is_preload_failed():
    lib = fixture("libfx-nomalloc.so")
    doc = ms_run("--preload", lib, "--expect-malloc", lib, "--", fixture("fx-regions"), "16")
    assert doc["status"] == "preload-failed"
    assert doc["preload_ok"] is False
    assert doc["malloc_object"].endswith("libc.so.6")


def test_glibc_run_resolves_malloc_to_libc():
    libc = allocators.glibc().malloc_object
    doc = ms_run("--expect-malloc", libc, "--", fixture("fx-regions"), "16")
    assert doc["status"] == "ok" and doc["preload_ok"] is True


def test_real_allocator_preload_takes_effect():
    other = [a for a in allocators.available() if a.preload]
    if not other:
        import pytest
        pytest.skip("no allocator package installed besides glibc")
    a = other[0]
    doc = ms_run("--preload", a.preload, "--expect-malloc", a.malloc_object, "--", fixture("fx-regions"), "16")
    assert doc["status"] == "ok", doc["detail"]
    assert doc["preload_ok"] is True


def test_missing_command_is_error():
    doc = ms_run("--", "/nonexistent/program")
    assert doc["status"] == "error"
    assert "No such file" in doc["detail"]


def test_nonzero_exit_is_error_and_oom_exit_code_is_oom():
    assert ms_run("--", "sh", "-c", "exit 5")["status"] == "error"
    assert ms_run("--oom-exit-code", "3", "--", "sh", "-c", "exit 3")["status"] == "oom"


def test_child_output_is_kept_apart_from_the_json():
    doc = ms_run("--", "sh", "-c", "echo '{\"status\": \"fake\"}'; echo to-stderr >&2")
    assert doc["status"] == "ok"
    assert '"fake"' in doc["stdout_tail"] and "to-stderr" in doc["stderr_tail"]


def test_counters_inherit_into_children():
    # The faults happen in a grandchild (sh -> fx-regions): inherit must count them.
    pages = 4096
    doc = ms_run("--", "sh", "-c", f"{fixture('fx-regions')} {pages}")
    assert doc["status"] == "ok"
    assert doc["counters"]["page-faults-minor"] >= pages
    assert doc["counters"]["task-clock-ns"] > 0
    assert regions_of(doc), "the grandchild's probe lines reach ms-run through the inherited fd"


def test_rss_is_sampled_over_time():
    doc = ms_run("--sample-ms", "5", "--", "sh", "-c", f"{fixture('fx-regions')} 20000; sleep 0.2")
    assert len(doc["rss_kb"]) >= 10
    times = [t for t, _ in doc["rss_kb"]]
    assert times == sorted(times)
    assert doc["maxrss_kb"] >= 20000 * 4


def test_unsupported_events_are_reported_with_reasons():
    doc = ms_run("--", "true")
    for name, why in doc["unsupported"].items():
        assert why and isinstance(why, str), name
    opened = set(doc["counters"]) | set(doc["syscalls"])
    assert not opened & set(doc["unsupported"])


@needs_pmu
def test_hardware_counters_count_when_a_pmu_exists():
    doc = ms_run("--", fixture("fx-regions"), "1024")
    assert doc["counters"]["instructions"] > 1e5
    assert doc["counters"]["cycles"] > 0
