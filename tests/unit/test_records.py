"""The typed records (issue 41): what a reader gets for a name never counted, never read, or a
field a stored document lacks or holds as something else; without processes."""
from __future__ import annotations

import json

from memsleuth.analysis import summary
from memsleuth.analysis.findings.base import Finding
from memsleuth.analysis.view import CellView
from memsleuth.records import cpu_profile, syscall_args
from memsleuth.records.evidence import Sample
from memsleuth.records.model import Counts, Readings
from memsleuth.records.sites import CallSites
from memsleuth.records.stored import RunFacts


def _sample(**doc) -> Sample:
    return Sample.from_msrun({"status": "ok", "wall_ns": 10**9, "user_ns": 6 * 10**8, "sys_ns": 4 * 10**8, **doc})


def test_a_count_never_made_reads_zero_and_is_not_said_counted():
    c = Counts({"mmap": 3})
    assert c["munmap"] == 0 and "munmap" not in c and c == {"mmap": 3}
    assert json.loads(json.dumps(c)) == {"mmap": 3}     # stored as the plain object it is


def test_a_reading_not_taken_reads_none():
    r = Readings({"page-faults-minor": 12.0})
    assert r["page-faults-major"] is None and r["page-faults-minor"] == 12.0 and "page-faults-major" not in r


def test_a_sample_counts_its_syscalls_and_reads_its_counters_as_taken():
    s = _sample(syscalls={"mmap": 40}, counters={"page-faults-minor": 900, "cycles": None})
    assert s.syscalls["mmap"] == 40 and s.syscalls["munmap"] == 0
    assert s.counters["cycles"] is None and s.counters["instructions"] is None


def test_a_commands_faults_are_rusages_where_ms_run_opened_no_fault_event():
    s = _sample(minflt=5000, majflt=3, counters={"task-clock-ns": 1e9})
    assert s.counters["page-faults-minor"] == 5000 and s.counters["page-faults-major"] == 3
    # an attached window's (or an older document's) perf readings are kept, a null one too
    s = _sample(minflt=5000, majflt=3, counters={"page-faults-minor": 4960, "page-faults-major": None})
    assert s.counters["page-faults-minor"] == 4960 and s.counters["page-faults-major"] is None
    # a run that wrote no figure (it failed before) says nothing of its faults
    assert _sample(counters={}).counters["page-faults-minor"] is None


def test_the_median_scope_keeps_none_for_a_counter_one_run_lacked_and_zero_for_an_uncounted_call():
    runs = [_sample(syscalls={"mmap": 40, "brk": 2}, counters={"page-faults-minor": 900, "cycles": 5e9}),
            _sample(syscalls={"mmap": 60}, counters={"page-faults-minor": 1100})]
    sc = CellView("glibc", "c", runs).process
    assert sc.syscalls["mmap"] == 50 and "brk" not in sc.syscalls and sc.syscalls["brk"] == 0
    assert sc.counters["cycles"] is None and sc.minflt == 1000


def test_the_evidence_table_says_not_counted_apart_from_zero():
    e = summary.MedianEvidence(scope="process", syscalls={"mmap": 0.0})
    assert e.syscalls["mmap"] == 0.0 and e.syscalls["madvise"] is None and e.hardware["cycles"] is None


def test_a_profile_built_from_plain_dicts_reads_zero_for_a_class_not_sampled():
    p = cpu_profile.Profile(period_ns=1000, samples=10, counts={"munmap": 10}, by_executable={"a": {"munmap": 10}})
    assert p.counts["mmap"] == 0 and p.by_executable["a"][cpu_profile.FAULT] == 0 and p.share("munmap") == 1.0


def test_a_profile_document_with_missing_or_null_fields_reads_as_empty():
    p = cpu_profile.read({"samples": None, "stacks": None, "frames": None})
    assert p is not None and p.samples == 0 and p.counts == {} and not p.usable


def test_syscall_arguments_of_the_wrong_kind_are_left_out_never_raised():
    a = syscall_args.SyscallArgs.from_dict({"munmap": {"calls": 5, "sizes": "x", "by_advice": [], "every": "7"},
                                            "unsupported": [], "faults": 3, "lost_records": True})
    m = a.of("munmap")
    assert m.total("calls") == 5 and m.sizes == () and m.by_advice == {} and m.every == 1
    assert a.faults is None and a.unsupported == {} and a.lost_records == 0


def test_a_finding_without_a_number_reads_none_for_it():
    f = Finding("x", "t", "m", [], "a", "high", numbers={"runtime": "Go"})
    assert f.numbers["runtime"] == "Go" and f.numbers["via_malloc"] is None
    assert Finding("y", "t", "m", [], "a", "high", numbers=None).numbers == {}


def test_call_sites_name_an_event_not_sampled_as_none():
    sites = CallSites.from_dict({"events": {"mmap": {"samples": 3}}})
    assert sites.events["mmap"].samples == 3 and sites.events["munmap"] is None
    assert CallSites.from_dict({"events": ["not", "a", "dict"]}).events == {}


def test_a_run_s_facts_take_their_defaults_where_a_stored_run_lacks_them():
    f = RunFacts.from_facts({"timings": [1, 2], "check_run": 7, "slurm_state": None})
    assert f.timings == {} and f.tries == [] and f.check_run == 7 and f.slurm_state == "?" and f.log_tail == ""
    assert RunFacts.from_facts(None).slurm_job == "?"


def test_a_result_line_s_latency_that_is_not_histograms_is_left_out():
    """A result line is whatever the program wrote to MEMSLEUTH_FD: a latency member of the wrong
    shape (ops a number, a histogram a string, buckets not pairs, inf) is no histogram, never a crash."""
    from memsleuth.analysis import latency
    good = {"every": 64, "timer_ns": 16, "ops": {"malloc": {"n": 3, "buckets": [[10, 2], [20, 1]], "max": 18, "sum": 40}}}
    for bad in ({"ops": 5}, {"ops": {"x": 3}}, {"ops": {"x": {"n": "a", "buckets": "zz"}}},
                {"ops": {"x": {"n": 1e400, "buckets": [[1e400, 1], [1, "q"]]}}}, {"every": "x"}, {"every": 1e400}):
        assert latency.summarise([{"latency": bad}]) == {} and latency.sampling_info([{"latency": bad}]) is None
        assert latency.operations_timed({"latency": bad}) == 0
    got = latency.summarise([{"latency": good}, {"latency": {"ops": 5}}])
    assert got["malloc"].n == 3 and got["malloc"].p50 == 10 and latency.sampling_info([{"latency": good}]) == (64, 16.0)


def test_call_site_lines_name_no_path_where_none_rounds_to_a_share():
    """One page fault in 400 through realloc's copy, the rest the program's own writes: no line that
    says "page faults inside the runtime/allocator: " and names nothing (it did, on a check of a buffer
    grown by realloc)."""
    from memsleuth.records.sites import lines_for
    e = {"samples": 401, "user_sites": [["main (grow.c:15)", 0.99], ["main (grow.c:9)", 0.01]],
         "internal_paths": [["realloc -> _int_realloc", 0.0025], ["realloc -> memcpy", 0.0025]]}
    lines = lines_for(CallSites.from_dict({"events": {"page-faults": e}}), "page-faults")
    assert lines == ["page faults come from (of 401 sampled stacks): main (grow.c:15) 99%; main (grow.c:9) 1%"], lines
    e["internal_paths"] = [["realloc -> _int_realloc", 0.6]]
    lines = lines_for(CallSites.from_dict({"events": {"page-faults": e}}), "page-faults")
    assert lines[1] == "page faults inside the runtime/allocator: realloc -> _int_realloc 60%", lines
    del e["internal_paths"]      # stored before the paths were: no line of them either
    assert len(lines_for(CallSites.from_dict({"events": {"page-faults": e}}), "page-faults")) == 1
