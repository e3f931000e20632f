"""When in a run a cost arises: from the times of the cost's own samples in the explaining run
(records/cpu_profile.Profile.when), or, where the run has none, from the counts of its events over
ms-run's timeline (running totals per tick).

The bulk of the cost is where the 10th to the 90th percentile of it falls, as fractions of the run:
- start-up: the bulk ends within the first STARTUP_SHARE of the run, or it begins at the run's
  start (within AT_START) and ends before its middle (paid once per process);
- teardown: the bulk starts within the last TEARDOWN_SHARE of the run, or it is narrower than
  SPREAD_SHARE of the run, comes after resident memory peaked and memory falls through both of its
  halves (memory being given back at the end);
- steady state: the bulk spans at least SPREAD_SHARE of the run (spread through it);
- mid-run: anything else, one stretch of the run.
A cost with fewer than MIN_SAMPLES samples (MIN_ROWS ticks for events), or a run shorter than
MIN_SPAN_MS, has no phase: a phase is said only where the cost's own times show it.
A window on a running process (check --pid) has neither a start-up nor a teardown: the process
started before it and goes on after it (`window`), so a cost bunched at either end is one stretch of
the window.
"""
from __future__ import annotations

from dataclasses import dataclass

MIN_ROWS = 8
MIN_SAMPLES = 20
MIN_SPAN_MS = 200
STARTUP_SHARE = 0.2
AT_START = 0.1
STARTUP_END = 0.5      # a bulk that begins AT_START ends before this share of the run to be start-up
TEARDOWN_SHARE = 0.2
SPREAD_SHARE = 0.5
# Teardown by memory: resident memory at the middle of the bulk at most this share of it at its
# start, and at its end at most this share of it at the middle.
TEARDOWN_RSS_FALL = 0.9
BULK = (0.1, 0.9)

SAMPLES = "samples"     # the basis: the cost's sampled times
EVENTS = "events"       # the counts of its calls or faults over the timeline


@dataclass(frozen=True)
class Phase:
    name: str            # "start-up", "steady state", "mid-run" or "teardown"
    start_ms: float      # the bulk of the cost: from, to (ms since the start)
    end_ms: float
    run_ms: float
    basis: str = EVENTS
    rss_peak_kb: float = 0.0     # teardown by memory: resident memory at its peak and at the bulk's end
    rss_end_kb: float = 0.0
    of_run: str = "run"          # "window": check --pid's, on a process that runs before and after it

    @property
    def text(self) -> str:
        of = "its sampled time" if self.basis == SAMPLES else "these events"
        span = f"{(self.end_ms - self.start_ms) / 1000:.2f} s of the {self.run_ms / 1000:.2f} s {self.of_run} " \
               f"({self.start_ms / 1000:.2f}-{self.end_ms / 1000:.2f} s) holds 80% of {of}"
        if self.name == "teardown":
            if not self.rss_peak_kb:     # only where it is, not what it is: an exit, or a last stretch of work
                return (f"teardown: {span}, all in the last {TEARDOWN_SHARE:.0%} of the run: paid once, as the "
                        "program ends (its exit, or a last stretch of work)")
            return (f"teardown: {span}, after resident memory peaked, while it fell from "
                    f"{self.rss_peak_kb / 1024:,.0f} MiB to {self.rss_end_kb / 1024:,.0f} MiB: a short program pays this "
                    "at every exit; a long-running server pays it once")
        if self.name == "start-up":
            return f"start-up: {span}: paid once per process, not per unit of work"
        if self.name == "mid-run":
            return f"mid-run: {span}: one stretch of the {self.of_run}, not spread over it"
        return f"steady state: {span}: spread over the {self.of_run}"


def in_window(found: Phase | None) -> Phase | None:
    """A phase read in a window on a running process: start-up and teardown are one stretch of it."""
    if found is None:
        return None
    name = "mid-run" if found.name in ("start-up", "teardown") else found.name
    return Phase(name, found.start_ms, found.end_ms, found.run_ms, found.basis, of_run="window")


def _at(times: list[float], cum: list[float], q: float) -> float:
    """The time at which the running total `cum` (from 0, ascending) first reaches q of its total,
    linear within a step."""
    goal = q * cum[-1]
    for i in range(1, len(cum)):
        if cum[i] >= goal:
            step = cum[i] - cum[i - 1]
            f = (goal - cum[i - 1]) / step if step > 0 else 0.0
            return times[i - 1] + f * (times[i] - times[i - 1])
    return times[-1]


def _decide(times: list[float], cum: list[float], run_ms: float, basis: str,
            rss: tuple[list[float], list[float]] | None) -> Phase:
    """The phase of a cost whose running total over the run (ms from its start) is `cum`; `rss`:
    (times as fractions of the run, resident memory in KiB) of a run of the same program, or None."""
    lo, hi = _at(times, cum, BULK[0]), _at(times, cum, BULK[1])
    lo_f, hi_f = lo / run_ms, hi / run_ms
    peak = end_rss = 0.0
    if hi_f <= STARTUP_SHARE or (lo_f <= AT_START and hi_f <= STARTUP_END):
        name = "start-up"
    elif lo_f >= 1 - TEARDOWN_SHARE:
        name = "teardown"
    elif hi_f - lo_f >= SPREAD_SHARE:
        name = "steady state"
    else:
        name = "mid-run"
        if rss is not None:
            fr, kb = rss
            # The last tick read while the process exited holds no memory: not a measurement.
            live = [(f, v) for f, v in zip(fr, kb) if v > 0]

            def at(x: float) -> float:       # resident memory at a fraction of the run: the last tick by then
                return next((v for f, v in reversed(live) if f <= x), live[0][1])

            if live:
                peak_f, peak = max(live, key=lambda p: p[1])
                mid_f = (lo_f + hi_f) / 2
                start_rss, mid_rss, end_rss = at(lo_f), at(mid_f), at(hi_f)
                # after the peak, and memory falling through both halves of the bulk
                if peak_f <= lo_f and mid_rss <= TEARDOWN_RSS_FALL * start_rss and end_rss <= TEARDOWN_RSS_FALL * mid_rss:
                    name = "teardown"
        if name != "teardown":
            peak = end_rss = 0.0
    return Phase(name, lo, hi, run_ms, basis, peak, end_rss)


def _rss(sample) -> tuple[list[float], list[float]] | None:
    t = sample.timeline if sample is not None else None
    rss = t.column("rss_kb") if t is not None else None
    times = t.times_ms if t is not None else None
    if not rss or not times or times[-1] <= times[0]:
        return None
    run = times[-1] - times[0]
    return [(x - times[0]) / run for x in times], [float(v) for v in rss]


def of_samples(profile, keys: tuple[str, ...], sample=None) -> Phase | None:
    """The phase of the explaining run's samples under these keys (cpu_profile.when_key), summed;
    `sample`: a run of the program whose resident memory over time tells a teardown."""
    if profile is None or not profile.when_bucket_ns or not profile.when_span_ns:
        return None
    rows = [profile.when[k] for k in keys if k in profile.when]
    if not rows:
        return None
    return of_buckets(sum_buckets(rows), profile.when_bucket_ns, profile.when_span_ns, sample)


def sum_buckets(rows) -> list[int]:
    """Rows of samples per bucket of time (of one run's buckets), added bucket by bucket."""
    n = max((len(r) for r in rows), default=0)
    return [sum(r[b] for r in rows if b < len(r)) for b in range(n)]


def of_buckets(counts: list[int], bucket_ns: int, span_ns: int, sample=None) -> Phase | None:
    """The phase of samples counted in buckets of `bucket_ns` from the run's start, over `span_ns`
    (ms-run's msr_when.h); `sample`: a run of the program whose resident memory tells a teardown."""
    if not bucket_ns or not span_ns or sum(counts) < MIN_SAMPLES:
        return None
    run_ms = span_ns / 1e6
    if run_ms < MIN_SPAN_MS:
        return None
    width = bucket_ns / 1e6
    times, cum = [0.0], [0.0]
    for b, k in enumerate(counts):
        times.append(min((b + 1) * width, run_ms))
        cum.append(cum[-1] + k)
    return _decide(times, cum, run_ms, SAMPLES, _rss(sample))


def of_events(sample, columns: tuple[str, ...]) -> Phase | None:
    """The phase of the events counted in `columns` (summed) in one run's timeline."""
    t = sample.timeline if sample is not None else None
    if t is None or len(t.rows) < MIN_ROWS:
        return None
    times = t.times_ms
    cols = [c for c in (t.column(name) for name in columns) if c is not None]
    if not cols or not times or times[-1] - times[0] < MIN_SPAN_MS:
        return None
    series = [sum(vals) for vals in zip(*cols)]
    if series[-1] - series[0] <= 0:
        return None
    rel = [x - times[0] for x in times]
    cum = [v - series[0] for v in series]
    return _decide(rel, cum, rel[-1], EVENTS, _rss(sample))
