"""When in a run a cost arises (analysis/phase.py), from the times of the cost's own samples, on
stored data: tests/data/check-phases.db.gz holds five real `memsleuth check` runs of fixtures in
native/fixtures/plain/: three of map_per_request (an 8 MiB mapping filled and unmapped per request,
computing between requests), one of fill_then_compute (1 GiB filled at start, then computing) and
one of late_churn (6 s of computing while it maps buffers, then 2 s of remapping them all)."""
from __future__ import annotations

import gzip
import shutil

from pathlib import Path

import pytest

from memsleuth.analysis import phase
from memsleuth.records import cpu_profile

DATA = Path(__file__).resolve().parents[1] / "data" / "check-phases.db.gz"


@pytest.fixture(scope="module")
def analyses(tmp_path_factory):
    from memsleuth.analysis.summary import analyse_check
    from memsleuth.records.store import Store
    copy = tmp_path_factory.mktemp("db") / "check-phases.db"
    with gzip.open(DATA) as src, open(copy, "wb") as dst:
        shutil.copyfileobj(src, dst)
    store = Store(str(copy), readonly=True)
    runs = [store.load_run(r.id) for r in sorted(store.list_runs(), key=lambda r: r.id)]
    store.close()
    return [(Path(run.spec.command[0]).name.removeprefix("plain-"), analyse_check(run)) for run in runs]


def _finding(a, fid):
    return next(f for f in a.findings if f.id == fid)


def test_the_stored_runs_are_the_fixtures(analyses):
    assert [name for name, _ in analyses] == ["map_per_request"] * 3 + ["fill_then_compute", "late_churn"]


def test_steady_churn_is_steady_in_three_runs_of_three(analyses):
    for _, a in analyses[:3]:
        f = _finding(a, "mmap-churn")
        assert f.phase == "steady state"
        line = next(e for e in f.evidence if e.startswith("steady state:"))
        assert "of its sampled time" in line and "spread over the run" in line


def test_the_working_set_filled_at_start_is_start_up(analyses):
    f = _finding(analyses[3][1], "first-touch")
    assert f.phase == "start-up"
    assert any(e.startswith("start-up:") and "paid once per process" in e for e in f.evidence)


def test_a_late_stretch_of_churn_is_neither_teardown_nor_steady(analyses):
    a = analyses[4][1]
    assert _finding(a, "mmap-churn").phase == "mid-run"
    # the first touches of the buffers mapped while computing are spread over the run
    assert _finding(a, "first-touch").phase == "steady state"


def test_every_sample_has_its_time(analyses):
    for _, a in analyses:
        p = a.view.profile
        assert p.when_bucket_ns > 0 and p.when_span_ns > 0
        # the run fills between half and all of ms-run's 32 buckets
        assert 16 <= p.when_span_ns / p.when_bucket_ns <= 32
        for cls, n in p.counts.items():
            if cls != cpu_profile.OTHER:
                assert sum(p.when.get(cls, ())) == n, cls


def _profile(buckets: list[int], bucket_ms: float = 100) -> cpu_profile.Profile:
    return cpu_profile.Profile(period_ns=1_000_000, samples=sum(buckets), counts={"munmap": sum(buckets)},
                               when={"munmap": tuple(buckets)}, when_bucket_ns=int(bucket_ms * 1e6),
                               when_span_ns=int(len(buckets) * bucket_ms * 1e6))


@pytest.mark.parametrize("buckets,name", [
    ([10] * 30, "steady state"),
    ([40] * 6 + [1] * 24, "start-up"),
    ([1] * 5 + [0] * 20 + [40] * 5, "teardown"),
    ([0] * 10 + [50] * 6 + [0] * 14, "mid-run"),
])
def test_the_phase_is_where_the_samples_concentrate(buckets, name):
    assert phase.of_samples(_profile(buckets), ("munmap",)).name == name


def test_no_phase_from_too_few_samples_or_a_short_run():
    assert phase.of_samples(_profile([1] * (phase.MIN_SAMPLES - 1)), ("munmap",)) is None
    assert phase.of_samples(_profile([10] * 30, bucket_ms=5), ("munmap",)) is None     # 150 ms
    assert phase.of_samples(_profile([10] * 30), ("brk",)) is None                       # none of its samples


def test_a_teardown_read_from_times_alone_says_where_it_is_not_what_it_is():
    p = phase.of_samples(_profile([1] * 5 + [0] * 20 + [40] * 5), ("munmap",))
    assert p.name == "teardown" and "all in the last 20% of the run" in p.text
    assert "at every exit" not in p.text        # that needs memory falling through it (a run's RSS)


def test_a_window_on_a_running_process_has_no_start_up_or_teardown():
    """check --pid: the process started before the window and runs on after it, so a cost bunched at the
    window's start or end is one stretch of the window, and the words say window, not run."""
    for buckets in ([40] * 6 + [1] * 24, [1] * 5 + [0] * 20 + [40] * 5):
        p = phase.in_window(phase.of_samples(_profile(buckets), ("munmap",)))
        assert p.name == "mid-run" and "of the 3.00 s window" in p.text and "one stretch of the window" in p.text
        assert "paid once" not in p.text and "exit" not in p.text
    steady = phase.in_window(phase.of_samples(_profile([10] * 30), ("munmap",)))
    assert steady.name == "steady state" and steady.text.endswith("spread over the window")
    assert phase.in_window(None) is None


def test_the_stored_attach_window_speaks_of_its_window(tmp_path):
    import shutil
    from pathlib import Path
    from memsleuth.analysis.summary import analyse_check
    from memsleuth.records.store import Store
    db = tmp_path / "a.db"
    shutil.copy(Path(__file__).resolve().parents[1] / "data" / "check-attach.db", db)
    st = Store(str(db), readonly=True)
    a = analyse_check(st.load_run(1))
    st.close()
    assert a.view.window
    texts = [e for f in a.findings for e in f.evidence if "holds 80% of" in e]
    assert texts and all(" s window " in t and " s run " not in t for t in texts), texts
