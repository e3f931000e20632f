"""When in a run a mechanism's events arise, read from ms-run's timeline (running totals per tick).

Three phases, from where the bulk of the events (the 10th to the 90th percentile of their running
total) falls against the run and its resident memory:
- teardown: the bulk comes after resident memory peaked and while it falls (memory being given
  back at the end): a short program pays it at every exit, a long-running server once;
- start-up: the bulk comes within the first STARTUP_SHARE of the run;
- steady state: anywhere else (spread through the run, or in its middle).
A run shorter than MIN_SPAN_MS or with fewer than MIN_ROWS ticks has no phase.
"""
from __future__ import annotations

from dataclasses import dataclass

MIN_ROWS = 8
MIN_SPAN_MS = 200
STARTUP_SHARE = 0.2
# Teardown: resident memory at the end of the events' window at most this share of its peak.
TEARDOWN_RSS_FALL = 0.9
BULK = (0.1, 0.9)


@dataclass(frozen=True)
class Phase:
    name: str            # "start-up", "steady state" or "teardown"
    start_ms: float      # the bulk of the events: from, to (ms since the start)
    end_ms: float
    run_ms: float
    rss_peak_kb: float
    rss_end_kb: float

    @property
    def text(self) -> str:
        span = f"{(self.end_ms - self.start_ms) / 1000:.2f} s of the {self.run_ms / 1000:.2f} s run " \
               f"({self.start_ms / 1000:.2f}-{self.end_ms / 1000:.2f} s) holds 80% of them"
        if self.name == "teardown":
            return (f"teardown: {span}, after resident memory peaked, while it fell from "
                    f"{self.rss_peak_kb / 1024:,.0f} MiB to {self.rss_end_kb / 1024:,.0f} MiB: a short program pays this "
                    "at every exit; a long-running server pays it once")
        if self.name == "start-up":
            return f"start-up: {span}: paid once per process, not per unit of work"
        return f"steady state: {span}"


def of_events(sample, columns: tuple[str, ...]) -> Phase | None:
    """The phase of the events counted in `columns` (summed) in one run's timeline."""
    t = sample.timeline if sample is not None else None
    if t is None or len(t.rows) < MIN_ROWS:
        return None
    times = t.times_ms
    cols = [c for c in (t.column(name) for name in columns) if c is not None]
    rss = t.column("rss_kb")
    if not cols or not times or rss is None or times[-1] - times[0] < MIN_SPAN_MS:
        return None
    series = [sum(vals) for vals in zip(*cols)]
    total = series[-1] - series[0]
    if total <= 0:
        return None
    lo = next(i for i, v in enumerate(series) if v - series[0] >= BULK[0] * total)
    hi = next(i for i, v in enumerate(series) if v - series[0] >= BULK[1] * total)
    # The last tick read while the process exited holds no memory: not a measurement.
    live = [r for r in rss if r > 0] or [0]
    peak_i = max(range(len(rss)), key=lambda i: rss[i])
    run_ms = times[-1] - times[0]
    end_rss = rss[hi] if rss[hi] > 0 else live[-1]
    if lo > 0 and lo >= peak_i and end_rss <= TEARDOWN_RSS_FALL * rss[peak_i]:
        name = "teardown"
    elif times[hi] - times[0] <= STARTUP_SHARE * run_ms:
        name = "start-up"
    else:
        name = "steady state"
    # The window a tick before the first event to the tick of the 90th percentile.
    start = times[max(lo - 1, 0)]
    return Phase(name, start - times[0], times[hi] - times[0], run_ms, float(rss[peak_i]), float(end_rss))
