"""Where the kernel time went: the rule that is never silent. When the kernel takes a large share
of the CPU time and no mechanism rule explains it, this says what entered the kernel (page
faults against each counted system call), with the numbers."""
from __future__ import annotations

from memsleuth.records import cpu_profile
from memsleuth.events import SYSCALL_COLUMNS, SYSCALLS
from memsleuth.analysis.findings.base import Finding, confidence_from_margin, mib, rate_per_s
from memsleuth.analysis.view import HUGE_WORDS_SHARE, CellView
from memsleuth.units import HUGE_PAGE_BYTES, PAGE_BYTES

# 30% of the CPU time in the kernel: a program that computes spends a few percent there.
SYS_SHARE = 0.30
# The counted memory work (faults and memory syscalls, at this machine's unit costs) must be at
# least this share of the kernel time for this rule to speak.
MEMORY_SHARE = 0.5
# System time is sampled per scheduler tick (4 ms at HZ=250): below a dozen ticks it is noise.
MIN_SYS_NS = 50_000_000


def check(view: CellView) -> list[Finding]:
    sc = view.main or view.process
    if sc is None or sc.sys_ns < MIN_SYS_NS or (sc.sys_share or 0) < SYS_SHARE:
        return []
    where = "the process" if sc.name == "process" else f"region {sc.name}"
    faults = (sc.minflt or 0) + (sc.majflt or 0)
    calls = {k: sc.syscalls[k] for k in SYSCALLS if sc.syscalls[k]}   # mprotect too
    split = view.kernel_split(sc, upper_bound=False)
    # It speaks for memory work no rule named: when the counted faults and memory syscalls are at
    # most half of the kernel time, the rest is another kernel path (I/O, exec, start-up's file
    # mappings), not memory behaviour; the run's one line then gives the kernel time in all.
    if sum(split.parts.values()) < MEMORY_SHARE * sc.sys_ns:
        return []
    # Where most of the faults' sampled time zeroed whole 2 MiB huge pages, a fault is not a 4 KiB page:
    # a Rust program on mimalloc (its arena asked for huge pages) took 266 faults, 573 ms of zeroing,
    # and read "= 1.0 MiB".
    huge = view.huge_fill_share() >= HUGE_WORDS_SHARE
    size = (f"most of their sampled time zeroing whole 2 MiB huge pages (up to {mib(faults * HUGE_PAGE_BYTES)})"
            if huge else mib(faults * PAGE_BYTES))
    evidence = [f"kernel time {sc.sys_ns / 1e6:,.0f} ms = {sc.sys_share:.0%} of {(sc.user_ns + sc.sys_ns) / 1e6:,.0f} ms "
                f"CPU time in {where} (threshold {SYS_SHARE:.0%})",
                f"page faults: {faults:,.0f} ({rate_per_s(faults, sc.wall_ns):,.0f}/s) = {size}, "
                f"about {split.describe(split.cost('page-faults'))}"]
    for name, n in sorted(calls.items(), key=lambda kv: -kv[1]):
        evidence.append(f"{name}: {n:,.0f} calls ({rate_per_s(n, sc.wall_ns):,.0f}/s), "
                        f"about {split.describe(split.cost(name))}")
    p = split.profile
    if p is not None:
        # Sampled: what the rest of the kernel time was, by path and, for other kernel work, by function.
        rest = sorted(((c, k) for c, k in p.counts.items() if c not in (cpu_profile.USER, cpu_profile.FAULT)
                       and c not in calls), key=lambda ck: -ck[1])[:5]
        if rest:
            evidence.append("the rest of the sampled kernel time, by path: " + ", ".join(
                f"{c} {k / p.samples:.0%}" for c, k in rest))
        if p.other_top:
            evidence.append("other kernel work, by innermost function (samples): " + ", ".join(
                f"{fn} {k:,}" for fn, k in p.other_top[:5]))
    else:
        evidence.append(f"not explained by these counts: {split.other_ns / 1e6:,.0f} ms (system calls memsleuth does "
                        "not count, such as read, write or exit's teardown, and faults' costs above this machine's "
                        "average)")
    if not sc.syscalls:
        evidence.append("system calls by name were not counted here (no tracepoints: see `memsleuth doctor`)")
    parts = dict(split.parts, other=split.other_ns)
    culprit = max(parts, key=parts.get)
    if culprit == "other":
        mechanism = ("most of the kernel time is not in the page faults or the memory system calls memsleuth counts: "
                     "it is another kernel path (I/O, other system calls)")
    elif culprit == "page-faults":
        mechanism = (f"the largest part of the kernel time is page faults ({faults:,.0f}, about "
                     f"{split.cost('page-faults') / 1e6:,.0f} ms): memory is being faulted in, first touched or "
                     "touched again after it was given back" +
                     (", most of the faults' time zeroing whole 2 MiB huge pages (transparent huge pages: a huge-page "
                      "fault clears 512 small pages' worth)" if huge else ""))
    else:
        mechanism = (f"the largest counted part of the kernel time is {culprit} ({calls[culprit]:,.0f} calls, about "
                     f"{split.cost(culprit) / 1e6:,.0f} ms)")
    mechanism += (" (each part sampled in the explaining run: analysis/cost.py)" if p is not None else
                  " (each part is its count times this machine's unit cost: analysis/cost.py)")
    return [Finding(
        id="kernel-time", title=f"{sc.sys_share:.0%} of the CPU time is in the kernel",
        mechanism=mechanism, evidence=evidence,
        advice="the counts above say which kernel path to look at (perf record -g on the program shows the call "
               "sites); no named mechanism explains this time",
        subject=view.label, confidence=confidence_from_margin(sc.sys_share / SYS_SHARE),
        numbers={"sys_share": sc.sys_share, "faults": faults, "syscalls": calls, "culprit": culprit,
                 "parts_ns": parts},
        calls=culprit if culprit in SYSCALL_COLUMNS else None, cost_ns=sc.sys_ns, cost_share=sc.sys_share)]
