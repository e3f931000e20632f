"""Exports of a stored run: CSV (one row per sample) and pyperf JSON (for `pyperf compare_to`)."""
from __future__ import annotations

import csv
import io

from memsleuth.evidence import HARDWARE_EVENTS, SYSCALLS
from memsleuth.store import StoredRun

CSV_COLUMNS = (["run_id", "cell_id", "allocator", "allocator_path", "params", "round", "warmup", "status",
                "detail", "exit_code", "signal", "wall_ns", "user_ns", "sys_ns", "minflt", "majflt", "maxrss_kb",
                "main_ops", "main_wall_ns", "ops_per_s"]
               + [f"syscall_{s}" for s in SYSCALLS]
               + ["page-faults-minor", "page-faults-major", "context-switches", "cpu-migrations", "task-clock-ns"]
               + list(HARDWARE_EVENTS))


def to_csv(run: StoredRun) -> str:
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(CSV_COLUMNS)
    for cell in run.cells:
        params = ";".join(f"{k}={v}" for k, v in cell.params.items())
        for rnd, warm, s in cell.samples:
            main = s.main
            row = [run.id, cell.id, cell.allocator["name"], cell.allocator.get("path"), params, rnd, int(warm),
                   s.status, s.detail or "", "" if s.exit_code is None else s.exit_code, s.signal_name or "",
                   s.wall_ns, s.user_ns, s.sys_ns, s.minflt, s.majflt, s.maxrss_kb,
                   main.ops if main else "", main.wall_ns if main else "",
                   f"{s.ops_per_s:.6g}" if s.ops_per_s else ""]
            row += [s.syscalls.get(n, "") for n in SYSCALLS]
            row += [_num(s.counters.get(n)) for n in ("page-faults-minor", "page-faults-major", "context-switches",
                                                      "cpu-migrations", "task-clock-ns")]
            row += [_num(s.counters.get(n)) for n in HARDWARE_EVENTS]
            w.writerow(row)
    return out.getvalue()


def _num(v) -> str:
    return "" if v is None else f"{v:.6g}"


def to_pyperf(run: StoredRun, path: str) -> None:
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
            runs.append(pyperf.Run([value], metadata={"name": cell.label, "unit": "second",
                                                      "loops": 1}, collect_metadata=False))
        if runs:
            benchmarks.append(pyperf.Benchmark(runs))
    if not benchmarks:
        from memsleuth.errors import UsageError
        raise UsageError(f"run {run.id} has no successful runs to export")
    pyperf.BenchmarkSuite(benchmarks).dump(path, replace=True)
