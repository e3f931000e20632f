"""Builds the ms-run argv for one cell (never a shell string) and parses its JSON into a Sample."""
from __future__ import annotations

import json
import os
import subprocess
import tempfile

from memsleuth import native
from memsleuth.evidence import Sample
from memsleuth.plan import Cell
from memsleuth.workloads.base import Workload

# ms-run's own limit is the timeout; this margin only guards against ms-run itself hanging.
_GRACE_S = 30.0


def msrun_argv(cell: Cell, out_path: str, *, timeout_s: float | None, mem_limit_bytes: int | None,
               counters: bool = True) -> list[str]:
    argv = [str(native.ms_run()), "--out", out_path]
    if timeout_s:
        argv += ["--timeout", f"{timeout_s:g}"]
    if mem_limit_bytes:
        argv += ["--mem-limit", str(mem_limit_bytes)]
    if cell.allocator.preload:
        argv += ["--preload", cell.allocator.preload]
    argv += ["--expect-malloc", cell.allocator.malloc_object]
    for k, v in cell.env.items():
        argv += ["--env", f"{k}={v}"]
    if cell.oom_exit_code is not None:
        argv += ["--oom-exit-code", str(cell.oom_exit_code)]
    if not counters:
        argv.append("--no-counters")
    return argv + ["--", *cell.command]


def run_cell(cell: Cell, *, timeout_s: float | None, mem_limit_bytes: int | None, counters: bool = True) -> Sample:
    with tempfile.TemporaryDirectory(prefix="memsleuth-") as tmp:
        out = os.path.join(tmp, "run.json")
        argv = msrun_argv(cell, out, timeout_s=timeout_s, mem_limit_bytes=mem_limit_bytes, counters=counters)
        try:
            proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=(timeout_s + _GRACE_S) if timeout_s else None)
        except subprocess.TimeoutExpired:
            return _failed(f"ms-run did not return within {timeout_s}s + {_GRACE_S}s")
        if proc.returncode == 130:
            raise KeyboardInterrupt
        try:
            # The command's output tails are raw bytes: a program may print anything, so bytes
            # that are not UTF-8 are replaced rather than allowed to fail the whole run.
            with open(out, encoding="utf-8", errors="replace") as f:
                doc = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            return _failed(f"ms-run failed (exit {proc.returncode}): {proc.stderr.strip() or e}")
    result = Workload.parse_result(doc.get("stdout_tail", "")) if cell.params else None
    return Sample.from_msrun(doc, result)


def _failed(detail: str) -> Sample:
    return Sample.from_msrun({"status": "error", "detail": detail})
