"""`memsleuth diff A B`: one row per matched cell, the count checks, and what differs between
the two setups besides the code under test."""
from __future__ import annotations

import shlex

from memsleuth.records.stored import StoredRun
from memsleuth.report.content import ChangeFigure, Report, Table
from memsleuth.report.wording import command_text, memsleuth_command, metric_text


# The regressed cells the first lines name.
ANSWER_CELLS = 3


def build(a: StoredRun, b: StoredRun, changes, ref, threshold: float, argv: list[str] | None = None) -> Report:
    """`memsleuth diff A B`: one row per matched cell, made to be pasted into a pull request, from
    regression.compare_runs (changes) and regression.reference_change (ref: B's reference cell over
    A's, or None)."""
    def value(c) -> str:
        if c is None:
            return "-"
        text, ci = metric_text(c)
        return text if c.estimate is None else f"{text} {ci}"

    rows = []
    for ch in changes:
        s, n = ch.slowdown, ch.normalised
        rows.append([ch.key, value(ch.before), value(ch.after),
                     f"{(s.median - 1) * 100:+.1f}% time" if s else "-",
                     (f"{(n.median - 1) * 100:+.1f}% time" + (f" [{(n.low - 1) * 100:+.1f}, {(n.high - 1) * 100:+.1f}]"
                                                              if n.low is not None else "")) if n else "-",
                     ("REGRESSION: " if ch.time_regression else "") + ch.verdict.text])
    regressions = sum(ch.regression for ch in changes)
    header = [f"A: run {a.id} ({a.created_at}, {a.name}, {a.machine.hostname})",
              f"B: run {b.id} ({b.created_at}, {b.name}, {b.machine.hostname})",
              f"threshold: a change is called only when its whole 95% CI lies beyond ±{threshold:.0%}"]
    if ref is not None:
        way = "slower" if ref.median >= 1 else "faster"
        header.append(f"reference cell (the same small glibc loop, once per round in both runs): B ran it "
                      f"{abs(ref.median - 1) * 100:.1f}% {way} than A; the same code on the same allocator, so that "
                      "change is the machine's. The verdicts read the normalised change, each round divided by its "
                      "reference")
    else:
        header.append("A and B ran at different times, and "
                      + ("neither run" if a.reference is None and b.reference is None else "only one run")
                      + " has the reference cell, so a shift of the whole machine between them is not cancelled and "
                      "reads as a change: choose a threshold above your machine's run-to-run shift "
                      "(docs/statistics.md)")
    if a.machine.cpu_model != b.machine.cpu_model or a.machine.kernel != b.machine.kernel:
        header.append("WARNING: the runs were made on different machines or kernels")
    header += setup_differences(a, b)
    table = Table("Changes, B against A", ["cell", "A", "B", "raw change", "normalised change [95% CI]", "verdict"],
                  rows, ["Change = B's time per op (or per run) / A's, median ratio with a seeded bootstrap 95% CI "
                         "(separate runs cannot be paired by round). Normalised: each round's time divided by the "
                         "same round's reference time first."], align_right={3, 4})
    tables = [table]
    counts = count_table(changes)
    if counts is not None:
        tables.append(counts)
    footer = [f"{regressions} cell(s) with a regression resolved beyond the thresholds." if regressions else
              "No regression resolved beyond the thresholds."]
    fig = ChangeFigure([ch.key for ch in changes],
                       [((e := ch.normalised or ch.slowdown).median, e.low, e.high) if (ch.normalised or ch.slowdown)
                        else None for ch in changes], [ch.time_regression for ch in changes], threshold)
    regressed = [ch for ch in changes if ch.regression]
    answer = [footer[0]] + [f"{ch.key}: {ch.verdict.text}" for ch in regressed[:ANSWER_CELLS]]
    if len(regressed) > ANSWER_CELLS:
        answer.append(f"and {len(regressed) - ANSWER_CELLS} more below")
    return Report(f"memsleuth diff — run {a.id} vs run {b.id}", header, tables, footer, answer=answer, figures=[fig],
                  command=memsleuth_command(argv or []), run=b, footer_alert=bool(regressions))


def count_table(changes) -> Table | None:
    """The count checks of a diff that are not a plain pass (a regression, an improvement, or a
    change the runs' spread leaves unresolved); None when every count passed."""
    from memsleuth.analysis import gate as gating
    rows, failed, passed = [], set(), 0
    for ch in changes:
        for c in ch.counts:
            if c.verdict == gating.PASS:
                passed += 1
                continue
            if c.gates and c.verdict == gating.REGRESSION:
                failed.add((len(rows), 2))
            rows.append([ch.key, c.metric, c.verdict.upper() if c.verdict == gating.REGRESSION else c.verdict
                         + ("" if c.gates else " (shown, not gated)"), c.text])
    if not rows:
        return None
    return Table("Counts, B against A (page faults, memory syscalls, resident memory)", ["cell", "count", "verdict", "why"],
                 rows, [f"{passed} other count check(s) passed. A count change is called only beyond its threshold and "
                        "when every run of B lies beyond every run of A (docs/ci.md)."], failed=failed)


def setup_differences(a: StoredRun, b: StoredRun) -> list[str]:
    """What differs between the setups of two runs besides the code under test: a change in the
    environment, the command, the allocators' versions or the limits can be the whole change."""
    out = []
    env_a = {k: v for c in a.cells for k, v in c.env.items()}
    env_b = {k: v for c in b.cells for k, v in c.env.items()}
    if env_a != env_b:
        def show(e):
            return " ".join(shlex.quote(f"{k}={v}") for k, v in sorted(e.items())) or "(none)"
        out.append(f"WARNING: the environments differ: A {show(env_a)}; B {show(env_b)}")
    cmd_a, cmd_b = a.spec.command, b.spec.command
    if cmd_a != cmd_b:
        out.append(f"WARNING: the commands differ: A {command_text(cmd_a or [a.name])}; B {command_text(cmd_b or [b.name])}")
    ver_a = {x.name: x.version for x in a.machine.allocators}
    ver_b = {x.name: x.version for x in b.machine.allocators}
    changed = [f"{n} {ver_a[n]} -> {ver_b[n]}" for n in ver_a if n in ver_b and ver_a[n] != ver_b[n]]
    if changed:
        out.append("WARNING: allocator versions differ: " + "; ".join(changed))
    if (a.spec.timeout_s, a.spec.mem_limit_bytes) != (b.spec.timeout_s, b.spec.mem_limit_bytes):
        out.append("note: the runs had different limits (timeout, memory cap)")
    return out
