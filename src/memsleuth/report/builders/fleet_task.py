"""A fleet task Slurm did not complete, as `fleet collect` recorded it."""
from __future__ import annotations

from memsleuth.records.stored import StoredRun
from memsleuth.report.content import Report, Table
from memsleuth.report.wording import command_text, memsleuth_command


def build(run: StoredRun, cells=None) -> Report:
    """A fleet task Slurm did not complete (`fleet collect` records it): its state and log tail;
    `cells` (analysis.RunAnalysis), whatever cells it has as compare analyses them, for its JSON."""
    f = run.facts
    header = [f"Slurm task {f.slurm_job} for target {run.name}: state {f.slurm_state}, "
              f"exit code {f.exit_code or '?'}, partition {f.partition or '?'}, node {f.node or '?'}",
              f"its command: {command_text(run.argv)}"]
    tail = f.log_tail.splitlines()
    return Report(f"memsleuth fleet task — run {run.id} ({run.status})", header,
                  [Table("Log tail", ["line"], [[line] for line in tail] or [["(empty)"]])],
                  command=memsleuth_command(run.argv), run=run, analysis=cells)
