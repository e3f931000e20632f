"""A stored run as pyperf JSON, for `python -m pyperf compare_to`."""
from __future__ import annotations

from memsleuth.errors import UsageError
from memsleuth.output import write_with
from memsleuth.store import StoredRun


def write(run: StoredRun, path: str) -> None:
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
    suite = pyperf.BenchmarkSuite(benchmarks)
    write_with(path, lambda tmp: suite.dump(tmp, replace=True), "the pyperf export")
