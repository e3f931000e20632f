"""`show RUN RUN ...`: the same cells measured on different machines, side by side."""
from __future__ import annotations

from memsleuth.records.stored import StoredRun
from memsleuth.report.content import RatioFigure, Report, Table
from memsleuth.report.wording import memsleuth_command, metric_text


def machine_fingerprint(run: StoredRun) -> list[str]:
    m = run.machine
    return [str(run.id), m.name, m.hostname or "-", f"{m.cpu_model} x{m.cpus}", " ".join(m.cpu_flags) or "-",
            m.kernel or "-", m.thp or "-", str(m.numa_nodes) if m.numa_nodes else "-", m.glibc or "-",
            m.governor or "none visible",
            "; ".join(f"{a.name} {a.version}" for a in m.allocators) or "-"]


def _same_machines(runs: list[StoredRun]) -> str | None:
    """A warning when two runs' machines have the same fingerprint (host, CPU, flags, kernel)."""
    seen: dict[tuple, int] = {}
    for r in runs:
        m = r.machine
        key = (m.hostname, m.cpu_model, m.cpus, tuple(m.cpu_flags), m.kernel, m.numa_nodes)
        if key in seen:
            return (f"runs {seen[key]} and {r.id} have the same machine fingerprint (host {m.hostname}, {m.cpu_model} "
                    f"x{m.cpus}, kernel {m.kernel}): a difference between them is one machine's run-to-run variation, "
                    "not a difference between machines")
        seen[key] = r.id
    return None


def build(runs: list[StoredRun], keys: list[str], matrix: list, same_cells: bool,
          argv: list[str] | None = None) -> Report:
    """`show RUN RUN ...`: the same cells measured on different machines, side by side. Per cell and
    machine: the metric, the ratio to the fastest allocator on that machine (paired by round, as
    the run itself computed it), and the ratio to the fastest machine for that cell (separate runs:
    bootstrap ratio of medians): regression.compare_machines computes them (keys, matrix)."""
    names = [f"{r.machine.name} (run {r.id})" for r in runs]
    noise = min(r.spec.noise for r in runs)
    rows, failed = [], set()
    ratios: dict[str, list[float | None]] = {k: [] for k in keys}
    resolved: dict[str, list[bool]] = {k: [] for k in keys}
    for key, row in zip(keys, matrix):
        for mc in row:
            c = mc.summary
            if c is None or c.estimate is None:
                rows.append([key, names[mc.run], "-" if c is None else c.label, "-", "-"])
                if c is not None:
                    failed.add((len(rows) - 1, 2))
                ratios[key].append(None)
                resolved[key].append(False)
                continue
            text, ci = metric_text(c)
            within = "fastest" if c.is_best else (c.verdict.text if c.verdict else "-")
            across = "fastest machine" if mc.fastest_machine else (mc.verdict.text if mc.verdict else "-")
            if mc.verdict_normalised is not None:
                across += f"; normalised by each run's reference: {mc.verdict_normalised.text}"
            ratios[key].append(1.0 if mc.fastest_machine else (mc.vs_fastest.median if mc.vs_fastest else None))
            resolved[key].append(mc.fastest_machine or bool(mc.verdict and mc.verdict.kind != "unresolved"))
            rows.append([key, names[mc.run], f"{text} {ci}", within, across])
    tables = [Table("By machine", ["cell", "machine", "metric [95% CI]", "vs the fastest allocator on this machine",
                                   "vs the fastest machine for this cell"], rows,
                    ["Within a machine, the paired per-round ratio its run computed; across machines, separate runs "
                     "(never paired): the ratio of medians with a seeded bootstrap 95% CI, called beyond "
                     f"±{noise:.0%}; where every run has the reference cell, also with each run's rounds divided by "
                     "its own reference (a shift of a whole machine between runs cancels)."],
                    failed=failed),
              Table("Machines", ["run", "machine", "host", "CPU", "memory-relevant CPU flags", "kernel", "THP",
                                 "NUMA nodes", "glibc", "governor", "allocators"],
                    [machine_fingerprint(r) for r in runs])]
    header = [f"{len(runs)} runs of {runs[0].kind} {runs[0].name}, by machine"]
    if not same_cells:
        header.append("WARNING: the runs measured different cells or programs: only cells present in several runs "
                      "compare across machines")
    same = _same_machines(runs)
    if same:
        header.append("WARNING: " + same)
    fig = RatioFigure(names, keys, [ratios[k] for k in keys], [resolved[k] for k in keys],
                      caption="Per cell, each machine's time over the fastest machine's: separate runs, a bootstrap "
                              "ratio of medians (1.00 = fastest machine); n.r. = not resolved beyond the noise.")
    return Report("memsleuth show — by machine", header, tables, figures=[fig], command=memsleuth_command(argv or []),
                  run=runs[-1])
