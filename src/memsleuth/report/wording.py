"""Wording shared by the report builders: how a cell, a figure with its CI, a command and a
machine are written. Formatting only; the numbers come from analysis.
"""
from __future__ import annotations

import shlex

from memsleuth.analysis.summary import CellSummary, Group, failure_label
from memsleuth.cases.base import Num, Ratio, Seq, ratio_text
from memsleuth.records.stored import StoredCell, StoredRun
from memsleuth.stats import MIN_SAMPLES_FOR_CI
from memsleuth.units import fmt_bytes, fmt_num, fmt_seconds, fmt_si, fmt_value


def params_text(params: dict, swept: list[str]) -> str:
    return ", ".join(f"{k}={params[k]}" for k in swept if k in params) or "-"


# ---- figures: the numbers the HTML report draws (drawn by report/html.py, computed here) ----

def group_label(g: Group, swept: list[str]) -> str:
    """A plot's name for a group: its swept values; "all cells" when nothing is swept (never "-")."""
    text = params_text(g.cells[0].cell.params, swept) if g.cells else ""
    return "all cells" if text in ("", "-") else text


def metric_text(c: CellSummary) -> tuple[str, str]:
    e = c.estimate
    if e is None:
        return failure_label(c.failures[0]) if c.failures else "NO DATA", ""
    unit = {"ops_per_s": "ops/s", "wall_s": "s", "cpu_s": "s CPU"}.get(c.metric, "")
    fmt = fmt_si if c.metric not in ("wall_s", "cpu_s") else (lambda x: f"{x:.4g}")
    ci = f"[{fmt(e.low)}, {fmt(e.high)}]" if e.low is not None else f"n/a (n={e.n} < {MIN_SAMPLES_FOR_CI})"
    return f"{fmt(e.median)} {unit}", ci


def verdict_text(c: CellSummary) -> str:
    """Against the group's fastest, from per-round ratios; called only beyond the noise threshold."""
    if c.estimate is None:
        return "-"
    if getattr(c, "not_reached", None) is not None:
        return "PRELOAD-FAILED: not ranked"
    if c.is_best:
        return "fastest" if c.best_resolved else "no winner resolved"
    return c.verdict.text if c.verdict else "-"


def n_text(c: CellSummary, target: float | None) -> str:
    n = f"{len(c.ok_samples)}" + (f" (+{len(c.failures)} failed)" if c.failures and c.ok_samples else "")
    hw = c.estimate.half_width_rel if c.estimate else None
    if hw is None:
        return n
    mark = "" if target is None else (" ok" if hw <= target else " (target not reached)")
    return f"{n}, ±{hw:.1%}{mark}"


def metric_title(run: StoredRun, groups: list[Group]) -> str:
    kinds = {c.metric for g in groups for c in g.cells if c.estimate is not None}
    if "output" in kinds:
        m = run.spec.metric or {}
        way = "higher" if m.get("higher", True) else "lower"
        return f"{m.get('name', 'metric')} (printed by the program, {way} is better)"
    if "cpu_s" in kinds:
        return "CPU time (whole process tree, user + system)" + ("; wall time where not CPU-bound"
                                                                  if "wall_s" in kinds else "")
    return "throughput (region main)" if "ops_per_s" in kinds else "wall time (whole process)"


def kb_ci(e) -> str:
    if e is None:
        return "n/a"
    if e.low is None:
        return f"{fmt_bytes(e.median * 1024)} (n={e.n} < {MIN_SAMPLES_FOR_CI})"
    return f"{fmt_bytes(e.median * 1024)} [{fmt_bytes(e.low * 1024)}, {fmt_bytes(e.high * 1024)}]"


def ns_ci(e) -> str:
    if e is None:
        return "-"
    text = f"{e.median:,.1f}"
    return text + (f" [{e.low:,.1f}, {e.high:,.1f}]" if e.low is not None else f" (n={e.n} < {MIN_SAMPLES_FOR_CI})")


def command_text(argv) -> str:
    """A command as it can be pasted into a shell."""
    return shlex.join(str(a) for a in argv)


def memsleuth_command(argv) -> str:
    """The memsleuth command line as it can be pasted (argv[0] may be a path or __main__.py)."""
    return command_text(["memsleuth", *list(argv)[1:]]) if argv else ""


def who_text(f) -> str | None:
    """Who makes a finding's costly calls, as the evidence decided it (analysis.attribute)."""
    if not getattr(f, "calls", None):
        return None
    if f.who == "program":
        return f"the program (its own code makes the {f.calls} calls: see the evidence)"
    if f.who == "allocator":
        return f"the allocator (it makes the {f.calls} calls: see the evidence)"
    if f.who == "runtime":
        return f"{f.numbers['runtime'] or 'the runtime'} (its own code makes the {f.calls} calls: see the call sites)"
    if getattr(f, "who_why", None):
        return f"not determined: {f.who_why}"
    compare = (f"run `memsleuth compare` under two allocators (the {f.calls} calls are the program's if their count "
               "does not change)")
    if getattr(f, "call_sites", None):
        # the sites were sampled and shown, but split: neither most through malloc/free nor most straight from the
        # program's code (analysis/summary.with_call_sites), or too few stacks unwound to its code
        return f"not determined: the sampled call sites above do not settle it; {compare}"
    return f"not determined: {compare}, or record the call sites (check without --no-where, compare with --where)"


def variant_lines(run: StoredRun) -> list[str]:
    """The --variant settings, and the allocators each did not apply to."""
    out = []
    for v in run.spec.variants or []:
        env = " ".join(shlex.quote(f"{k}={val}") for k, val in sorted(v.get("env", {}).items()))
        skipped = v.get("skipped") or []
        out.append(f"variant {v.get('name')}: {env}" + (f"; does not apply to {', '.join(skipped)}: skipped"
                                                        if skipped else ""))
    return out


def environment_lines(cells: list[StoredCell]) -> list[str]:
    """The --env settings the measured processes ran with (per cell where they differ)."""
    # Variants say their own settings (variant_lines): here the settings every cell started from.
    cells = [c for c in cells if c.params.get("variant") in (None, "default")]
    envs = {tuple(sorted(c.env.items())) for c in cells}
    if not any(envs):
        return []
    if len(envs) == 1:
        return ["environment: " + " ".join(shlex.quote(f"{k}={v}") for k, v in sorted(cells[0].env.items()))]
    return [f"environment of {c.label}: " + (" ".join(shlex.quote(f"{k}={v}") for k, v in sorted(c.env.items()))
                                             or "(none set)") for c in cells]


def leftover_lines(cells: list[StoredCell]) -> list[str]:
    """Processes a command left running, which ms-run had to kill when it ended."""
    seen: dict[str, int] = {}
    runs = 0
    for c in cells:
        for _, _, s in c.samples:
            if s.leftover_processes:
                runs += 1
                for p in s.leftover_processes:
                    seen[str(p.get("comm"))] = seen.get(str(p.get("comm")), 0) + 1
    if not seen:
        return []
    names = ", ".join(f"{n} (x{k})" for n, k in sorted(seen.items()))
    return [f"killed after the command ended, in {runs} run(s): processes it left running: {names}"]


def machine_lines(run: StoredRun) -> list[str]:
    m = run.machine
    load = f"{m.loadavg_1m:.2f}" if m.loadavg_1m is not None else "n/a"
    return [f"machine: {m.cpu_model} x{m.cpus}, kernel {m.kernel}, glibc {m.glibc}, THP {m.thp}, load {load}",
            "allocators: " + "; ".join(f"{a.name} {a.version}" for a in m.allocators)]


def case_cell_text(c) -> str:
    """A case table's cell (cases.base: a label, Num, Seq or Ratio) as the report shows it."""
    if isinstance(c, Num):
        return fmt_num(c.value, ("+" if c.signed else "") + c.spec, c.unit)
    if isinstance(c, Seq):
        return c.sep.join(case_cell_text(x) for x in c.parts)
    if isinstance(c, Ratio):
        return ratio_text(c.estimate)
    return str(c)


# ---- the answer: a report's first lines ----

# The costliest findings a report's first lines name (findings come ordered by cost).
ANSWER_FINDINGS = 2


def failures_answer(failed: list, measured: list) -> list[str]:
    """A failed run says so first: its status (TIMEOUT, OOM, SEGFAULT, ERROR) and why, and whether
    anything was measured at all."""
    if not failed:
        return []
    from memsleuth.analysis.summary import failure_label
    first = failed[0]
    what = failure_label(first) + (f": {first.detail}" if first.detail else "")
    if len(failed) >= len(measured):
        ran = [s for s in failed if (s.user_ns or 0) + (s.sys_ns or 0) > 0 and (s.wall_ns or 0) > 0]
        if len(ran) == 1:     # counted until it ended: what follows is of that part, never of a whole run
            return [f"{what}: no run finished; the figures below are of the {fmt_seconds(ran[0].wall_ns)} it ran "
                    "until then, not of a whole run (the Failures table below)"]
        if ran:
            return [f"{what}: no run finished; the figures below are of what {len(ran)} runs counted until each "
                    "ended, not of a whole run (the Failures table below)"]
        return [f"{what}: nothing was measured, so nothing can be said of its memory (the Failures table below)"]
    return [f"{what} in {len(failed)} of {len(measured)} runs: the figures below are the other runs'"]


def findings_answer(found: list, quiet: str | None, own_subject: str = "") -> list[str]:
    """A report's first lines from its findings: each costliest mechanism's headline (its title
    carries its cost) and what to change, then where the evidence is; or the one line that says no
    mechanism is material. `own_subject`: the subject not worth naming (check's one cell)."""
    from memsleuth.analysis.summary import MEASUREMENT_FINDINGS
    material = [f for f in found if f.id not in MEASUREMENT_FINDINGS]
    if not material:
        return [quiet] if quiet else []
    lines = []
    for f in material[:ANSWER_FINDINGS]:
        subject = f"{f.subject}: " if f.subject and f.subject != own_subject else ""
        lines += [f"{subject}{f.title}", f"  change: {f.advice}"]
    rest = len(material) - ANSWER_FINDINGS
    lines.append(("the evidence" if rest <= 0 else f"{rest} more finding(s), and the evidence for each,")
                 + " below under Findings")
    return lines


# ---- a change measured by the gate's checks (gate, check --try) ----

def change_text(c, ci: bool = True) -> str:
    """A check's change, candidate against baseline: '+12.3% [+8.1, +16.0]' (with its CI), '+12%'
    (without), 'new' for a count that was zero, '-' where it was not measured."""
    e = c.change
    if e is None:
        return "-"
    if c.baseline == 0 and c.candidate:
        return "new"
    if not ci:
        return f"{(e.median - 1) * 100:+.0f}%"
    text = f"{(e.median - 1) * 100:+.1f}%"
    if e.low is not None and e.high is not None:
        text += f" [{(e.low - 1) * 100:+.1f}, {(e.high - 1) * 100:+.1f}]"
    return text


def trial_why(t) -> str:
    """Why a candidate got its verdict (analysis.tried.Trial), from the checks that decided it."""
    from memsleuth.analysis import tried
    j = t.judgement
    cost, up = j.cost, ", ".join(f"{c.metric} {change_text(c, ci=False)}" for c in j.up)
    if j.verdict == tried.TRADE_OFF:
        why = f"{cost.metric} {change_text(cost, ci=False)} down, {up} up"
    elif j.verdict == tried.HELPS:
        why = f"{cost.metric} {change_text(cost, ci=False)}"
    elif j.verdict == tried.WORSE:
        why = f"{up} up"
    elif j.verdict == tried.NO_EFFECT:
        why = f"{cost.metric}: no change beyond ±{cost.threshold:.0%}"
    elif cost.kind == "time" and cost.change is not None and cost.change.low is not None and cost.change.high is not None:
        e = cost.change
        why = (f"{cost.metric} {(e.median - 1) * 100:+.1f}% [{(e.low - 1) * 100:+.1f}%, {(e.high - 1) * 100:+.1f}%]: "
               f"the CI is neither inside ±{cost.threshold:.0%} nor beyond it")
    else:
        why = f"{cost.metric}: {cost.text}"
    if t.untouched:
        why += "; it left the evidence of " + ", ".join(t.untouched) + " unchanged"
    return why


def evidence_moved(checks) -> str:
    """What happened to a finding's evidence: 'brk calls 84 -> 3; page faults 81,774 -> 82,104'."""
    return "; ".join(f"{c.metric} " + ("not measured" if c.baseline is None or c.candidate is None else
                                       f"{fmt_value(c.baseline, c.unit)} -> {fmt_value(c.candidate, c.unit)}")
                     for c in checks)


def time_basis_lines(bases) -> list[str]:
    """Which time judged whole-process cells, and why: CPU time where the program is CPU-bound and
    other work stretched its wall time; wall time, with how noisy each was, where that was noisy."""
    from memsleuth.analysis.summary import NOISIER
    cpu = [(w, b) for w, b in bases if b.metric == "cpu_s"]
    noisy_wall = [(w, b) for w, b in bases if b.metric == "wall_s" and b.wall_half >= NOISIER * b.cpu_half]
    lines = []
    if cpu:
        wheres = ", ".join(w for w, _ in cpu)
        bound = min(b.cpu_per_wall for _, b in cpu)
        blocked = max(b.blocks_per_cpu_s for _, b in cpu)
        wall, cpu_half = max(b.wall_half for _, b in cpu), max(b.cpu_half for _, b in cpu)
        lines.append(f"Judged by CPU time (the process tree's user + system, paired by round) at {wheres}: the program "
                     f"is CPU-bound (it ran {bound:.0%} of its wall time or more and blocked at most {blocked:,.0f} "
                     f"times per CPU second) and its wall time's CI (±{wall:.0%}) was wider than its CPU time's "
                     f"(±{cpu_half:.0%}): other work on the machine stretched the wall time, not the work.")
    if noisy_wall:
        wheres = ", ".join(w for w, _ in noisy_wall)
        bound = min(b.cpu_per_wall for _, b in noisy_wall)
        lines.append(f"Judged by wall time at {wheres}: the program is not CPU-bound (its CPU time is {bound:.0%} of "
                     f"its wall time, and it blocked {max(b.blocks_per_cpu_s for _, b in noisy_wall):,.0f} times per "
                     "CPU second), so its waiting counts; the wall time's CI was ±"
                     f"{max(b.wall_half for _, b in noisy_wall):.0%} against ±{max(b.cpu_half for _, b in noisy_wall):.0%}"
                     " for CPU time.")
    return lines


def compare_answer(s) -> list[str]:
    """A comparison's first lines, from what it resolved (analysis.summary.Standings)."""
    lines = time_basis_lines(s.bases)
    if s.wins:
        parts = []
        for who, places in sorted(s.wins.items(), key=lambda kv: -len(kv[1])):
            lo, hi = min(p[1] for p in places), max(p[2] for p in places)
            tied = sorted({t for p in places for t in p[3]})
            parts.append(f"{who} at {', '.join(p[0] for p in places)} (others resolved {lo:.2f}-{hi:.2f}x slower"
                         + (f"; not resolved from {', '.join(tied)}" if tied else "") + ")")
        lines.append("Fastest, resolved by paired rounds: " + "; ".join(parts) + ".")
    within = [w for w in s.unresolved if w not in s.too_few]
    if within:
        lines.append(f"No winner resolved at {', '.join(within)}: the paired ratios' CIs include no difference "
                     "beyond the noise threshold.")
    for w, (n, cells) in s.too_few.items():
        lines.append(f"No winner resolved at {w}: {n} paired round{'s' if n != 1 else ''} give no 95% CI "
                     f"({MIN_SAMPLES_FOR_CI} rounds at least); the medians, not a verdict: "
                     + ", ".join(f"{c.cell.contender} {metric_text(c)[0]}" for c in cells) + ".")
    if s.smallest:
        lines.append("Smallest peak RSS, resolved: " + "; ".join(f"{who} at {', '.join(places)}"
                                                                  for who, places in s.smallest.items()) + ".")
    return lines
