"""A stored run as CSV: one row per sample, every number at full precision."""
from __future__ import annotations

import csv
import io

from memsleuth.events import HARDWARE, SOFTWARE, SYSCALLS
from memsleuth.records.stored import StoredRun
from memsleuth.textsafe import clean_bytes

CSV_COLUMNS = (["run_id", "cell_id", "allocator", "allocator_path", "params", "round", "warmup", "status",
                "detail", "exit_code", "signal", "wall_ns", "user_ns", "sys_ns", "minflt", "majflt", "maxrss_kb",
                "main_ops", "main_wall_ns", "ops_per_s"]
               + [f"syscall_{s}" for s in SYSCALLS] + list(SOFTWARE) + list(HARDWARE))


def _num(v) -> str:
    """repr of a float is the shortest text that reads back to the same number."""
    if v is None:
        return ""
    return str(int(v)) if isinstance(v, float) and v.is_integer() and abs(v) < 2**53 else repr(v)


# A text field that a spreadsheet would read as a formula (=, +, -, @, tab, carriage return first)
# gets a leading apostrophe (OWASP's CSV injection advice); numbers are written as numbers.
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def cell_text(v):
    """A CSV field: text neutralised against formula injection, bytes that were not UTF-8 replaced."""
    if isinstance(v, str):
        v = clean_bytes(v)
        return "'" + v if v.startswith(_FORMULA) else v
    return v


def render(report) -> str:
    """The stored run behind a report (report.run), one row per sample."""
    return text(report.run)


def text(run: StoredRun) -> str:
    """A stored run, one row per sample."""
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(CSV_COLUMNS)
    for cell in run.cells:
        params = ";".join(f"{k}={v}" for k, v in cell.params.items())
        for rnd, warm, s in cell.samples:
            main = s.main
            row = [run.id, cell.id, cell.allocator.name, cell.allocator.path, params, rnd, int(warm),
                   s.status, s.detail or "", "" if s.exit_code is None else s.exit_code, s.signal_name or "",
                   s.wall_ns, s.user_ns, s.sys_ns, s.minflt, s.majflt, s.maxrss_kb,
                   main.ops if main else "", main.wall_ns if main else "", _num(s.ops_per_s)]
            row += [s.syscalls.get(n, "") for n in SYSCALLS]
            row += [_num(s.counters[n]) for n in SOFTWARE]
            row += [_num(s.counters[n]) for n in HARDWARE]
            w.writerow([cell_text(v) for v in row])
    return out.getvalue()
