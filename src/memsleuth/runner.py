"""Runs a plan: a warm-up per cell, then rounds that run every cell once, interleaved.

Interleaving (A B C D A B C D ...) spreads slow drifts of the machine over all alternatives
alike, and lets the analysis pair samples by round. The order inside a round rotates, so that
no allocator always runs right after the same neighbour. Every sample is stored the moment it
exists; Ctrl-C keeps what finished.
"""
from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from memsleuth import launcher, native
from memsleuth.plan import Plan
from memsleuth.store import Store


@dataclass
class Outcome:
    run_id: int
    interrupted: bool
    samples: int


def schedule(plan: Plan) -> list[tuple[int, int, bool]]:
    """(cell index, round, warm-up) in the order they run.

    Warm-ups first, one per cell; then `reps` rounds over each group of compared cells, the
    group's order rotated by one each round.
    """
    order: list[tuple[int, int, bool]] = []
    groups = [idx for _, idx in plan.groups()]
    for idx in groups:
        for i in idx:
            order += [(i, -1, True)] * plan.warmup
    for r in range(plan.reps):
        for idx in groups:
            k = r % len(idx)
            for i in idx[k:] + idx[:k]:
                order.append((i, r, False))
    return order


class TracepointHolder:
    """Keeps the syscall tracepoints registered while a comparison runs (`ms-run --hold-events`).

    Without it every measured process pays ~40 ms per tracepoint at exit, when its last perf
    event on that tracepoint closes and the kernel waits for an RCU grace period (measured in
    bench/overhead.py). With a holder alive, those closes are cheap.
    """

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "TracepointHolder":
        try:
            self.proc = subprocess.Popen([str(native.ms_run()), "--hold-events"], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                         start_new_session=True)
            self.proc.stdout.readline()  # "ready": the events are open
        except OSError:
            self.proc = None
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is not None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def run(plan: Plan, store: Store, run_id: int, cell_ids: list[int], console: Console | None = None) -> Outcome:
    console = console or Console(stderr=True)
    steps = schedule(plan)
    done = 0
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), TimeRemainingColumn(), console=console, transient=True,
                        disable=not console.is_terminal)
    try:
        with TracepointHolder(), progress:
            task = progress.add_task("measuring", total=len(steps))
            failed_warmup: set[int] = set()
            for cell_index, round_, warmup in steps:
                if cell_index in failed_warmup:
                    progress.advance(task)
                    continue
                cell = plan.cells[cell_index]
                what = "warm-up" if warmup else f"round {round_ + 1}/{plan.reps}"
                progress.update(task, description=f"{cell.label} {what}")
                sample = launcher.run_cell(cell, timeout_s=plan.timeout_s, mem_limit_bytes=plan.mem_limit_bytes)
                store.add_sample(cell_ids[cell_index], round_, warmup, sample)
                if warmup and not sample.ok:
                    failed_warmup.add(cell_index)
                done += 1
                progress.advance(task)
                if not console.is_terminal and done % max(1, len(steps) // 10) == 0:
                    print(f"memsleuth: {done}/{len(steps)} runs", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        store.finish_run(run_id, "interrupted")
        return Outcome(run_id, True, done)
    store.finish_run(run_id, "complete")
    return Outcome(run_id, False, done)
