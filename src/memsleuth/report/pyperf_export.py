"""A stored run as pyperf JSON, for `python -m pyperf compare_to`."""
from __future__ import annotations

from memsleuth.errors import UsageError
from memsleuth.report.output import write_with
from memsleuth.records.stored import StoredRun


def render(report) -> str:
    """The stored run behind a report (report.run) as pyperf JSON text."""
    import os
    import tempfile
    fd, tmp = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        _suite(report.run).dump(tmp, replace=True)
        with open(tmp, encoding="utf-8") as f:
            return f.read()
    finally:
        os.unlink(tmp)


def write(run: StoredRun, path: str) -> None:
    suite = _suite(run)
    write_with(path, lambda tmp: suite.dump(tmp, replace=True), "the pyperf export")


def _suite(run: StoredRun):
    """One pyperf benchmark per cell; one pyperf run per measured sample, its value in seconds
    (per operation for workloads with region main, per process for commands)."""
    import pyperf

    benchmarks = []
    for cell in run.cells:
        runs = []
        for _, warm, s in cell.samples:
            if warm or not s.ok:
                continue
            value = 1.0 / s.ops_per_s if s.ops_per_s else s.wall_ns / 1e9
            runs.append(pyperf.Run([value], metadata={"name": cell.label, "unit": "second", "loops": 1},
                                   collect_metadata=False))
        if runs:
            benchmarks.append(pyperf.Benchmark(runs))
    if not benchmarks:
        raise UsageError(f"run {run.id} has no successful runs to export")
    return pyperf.BenchmarkSuite(benchmarks)
