"""Change points in a history of runs (trend.py), on synthetic series and on the stored run."""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from memsleuth.analysis import trend
from memsleuth.report import html, markdown
from memsleuth.report.builders import trend as trend_report
from memsleuth.records.store import Store

DATA = Path(__file__).resolve().parents[1] / "data" / "compare-random-mixed.db"


def points(values):
    return [trend.Point(i + 1, f"t{i}", v, None, None) for i, v in enumerate(values)]


def noisy(levels: list[tuple[float, int]], noise: float, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [level * (1 + rng.gauss(0, noise)) for level, n in levels for _ in range(n)]


def test_one_step_in_noise_is_found_at_its_run():
    values = noisy([(100.0, 12), (115.0, 8)], 0.02)
    steps, sigma = trend.find_steps(points(values), 0.05)
    assert [s.run for s in steps] == [13]
    assert steps[0].change == pytest.approx(1.15, abs=0.03) and 0.005 < sigma < 0.05


@pytest.mark.parametrize("seed", range(20))
def test_noise_alone_gives_no_step(seed):
    steps, _ = trend.find_steps(points(noisy([(100.0, 30)], 0.05, seed)), 0.05)
    assert steps == []


def test_one_odd_run_is_an_outlier_not_two_steps():
    values = [100.0] * 10 + [180.0] + [100.0] * 10
    assert trend.find_steps(points(values), 0.05)[0] == []


def test_a_step_below_the_threshold_or_the_floor_is_not_reported():
    values = [1000.0] * 8 + [1030.0] * 8          # deterministic, +3%: a real step, below 10%
    assert trend.change_points([v / 0.001 for v in values], 10.0) == [8]
    assert trend.find_steps(points(values), 0.10)[0] == []
    small = [50.0] * 8 + [80.0] * 8                # +60%, but 30 calls: under a 100-call floor
    assert trend.find_steps(points(small), 0.10, floor=100)[0] == []
    assert [s.run for s in trend.find_steps(points(small), 0.10)[0]] == [9]


def test_two_steps_and_a_short_series():
    values = noisy([(10.0, 6), (14.0, 6), (9.0, 6)], 0.01)
    assert [s.run for s in trend.find_steps(points(values), 0.05)[0]] == [7, 13]
    assert trend.find_steps(points([1.0, 2.0, 3.0]), 0.05) == ([], None)


def test_series_from_stored_runs_and_its_reports():
    store = Store(str(DATA), readonly=True)
    run = store.load_run(store.latest_run_id())
    got = trend.series([run, run, run, run])
    times = [s for s in got if s.metric == "time"]
    assert times and all(len(s.points) == 4 and not s.steps for s in times)
    report = trend_report.build(got, 4, ["memsleuth", "history", "--trend"], 0.05, 0.10)
    assert report.answer == ["No step found in any series (at these thresholds)"]
    assert "| cell | metric | runs |" in markdown.render(report)
    page = html.render(report)
    assert page.count("<svg") == len(times)
