"""Madvise storm / eager purging (seed 003): the allocator hands pages back to the kernel on
(almost) every free, and pays for it in system time and re-faults."""
from __future__ import annotations

from memsleuth.findings.base import Finding, confidence, kernel_share
from memsleuth.findings.view import CellView

# Seed 003's allocator made 1081 madvise calls in 1M ops (1.08 per 1000); glibc, mimalloc,
# jemalloc and tcmalloc make none inside random-mixed's region main on this project's machine.
# Half the seed's rate is well clear of both.
MADVISE_PER_KOP = 0.5
# Without an op count (a plain command): calls per second of wall time.
MADVISE_PER_S = 1000.0
# A storm costs kernel time: a quarter of the CPU time in the kernel (seed 003: 89.5%).
SYS_SHARE = 0.25
# Fewer calls than this are not a storm at any rate (start-up, a final trim).
MIN_CALLS = 50
# Only with at least this many page faults per madvise call does the finding say the purged
# pages are faulted in again. A page purged twice without a touch between needs one re-fault,
# so even a pure purge/re-fault loop shows fewer faults than calls (the test fixture: 0.50).
REFAULTS_PER_CALL = 0.25

ADVICE = {
    "jemalloc": "purge later: MALLOC_CONF=dirty_decay_ms:10000,muzzy_decay_ms:10000 (or -1 to never purge)",
    "mimalloc": "purge later: raise MIMALLOC_PURGE_DELAY (MIMALLOC_RESET_DELAY before mimalloc 2.1), "
                "or -1 to never purge",
    "tcmalloc": "release less often: TCMALLOC_RELEASE_RATE=0 stops returning free spans to the kernel",
    "glibc": "trim less: GLIBC_TUNABLES=glibc.malloc.trim_threshold=<bytes larger than the churn> "
             "(glibc returns freed pages of secondary arenas and the heap top beyond it)",
}
GENERIC = "purge lazily: delay returning freed pages to the kernel, or batch it above a threshold of free pages"


def check(view: CellView) -> list[Finding]:
    sc = view.scope
    if sc is None or "madvise" not in sc.syscalls:
        return []
    calls = sc.syscalls["madvise"]
    share = sc.sys_share
    if calls < MIN_CALLS or share is None or share < SYS_SHARE:
        return []
    if sc.ops:
        rate, threshold, unit = sc.per_kop(calls), MADVISE_PER_KOP, "per 1000 ops"
    else:
        rate, threshold, unit = calls / (sc.wall_ns / 1e9), MADVISE_PER_S, "per second"
    if rate < threshold:
        return []
    faults = sc.minflt
    rate_text = (f"{rate:,.2f} {unit}; threshold {threshold}" if sc.ops else
                 f"{rate:,.0f} {unit}; threshold {threshold:,.0f}")
    evidence = [f"{calls:,.0f} madvise calls in {'region ' + sc.name if sc.name != 'process' else 'the process'} "
                f"({rate_text})",
                kernel_share(sc, SYS_SHARE)]
    advised = view.args("madvise", "bytes") if sc.name == "process" else None
    if advised:
        kinds = _advice_kinds(view)
        evidence.append(f"they covered {advised / (1 << 20):,.1f} MiB ({advised / calls / 1024:,.1f} KiB per call)"
                        + (f", advice {kinds}" if kinds else "") + " (the calls' arguments, from the kernel)")
    refaults = faults is not None and faults >= REFAULTS_PER_CALL * calls
    if faults is not None:
        evidence.append(f"{faults:,.0f} minor page faults in the same span ({faults / calls:.2f} per madvise call)")
    mechanism = "freed memory is handed back to the kernel with madvise at a high rate, and the time goes to the kernel"
    if refaults:
        mechanism += ("; the page faults are as many as purged pages touched again would make (whether they land in "
                      "the purged ranges is not measured)")
    return [Finding(
        id="madvise-storm", title="Madvise storm: eager purging of freed memory",
        mechanism=mechanism,
        evidence=evidence, advice=ADVICE.get(view.allocator, GENERIC), subject=view.label,
        confidence=confidence(min(rate / threshold, share / SYS_SHARE)),
        numbers={"madvise": calls, "rate": rate, "rate_unit": unit, "sys_share": share, "minflt": faults},
        calls="madvise")]


# MADV_* numbers (asm-generic/mman-common.h) as the kernel's tracepoint reports them.
ADVICE_NAMES = {0: "NORMAL", 1: "RANDOM", 2: "SEQUENTIAL", 3: "WILLNEED", 4: "DONTNEED", 8: "FREE", 9: "REMOVE",
                10: "DONTFORK", 11: "DOFORK", 12: "MERGEABLE", 13: "UNMERGEABLE", 14: "HUGEPAGE", 15: "NOHUGEPAGE",
                16: "DONTDUMP", 17: "DODUMP", 20: "COLD", 21: "PAGEOUT", 22: "POPULATE_READ", 23: "POPULATE_WRITE",
                25: "COLLAPSE"}


def _advice_kinds(view: CellView) -> str:
    s = view.explain_sample
    by = ((s.syscall_args.get("madvise") or {}).get("by_advice") or {}) if s else {}
    parts = sorted(((int(k), v[0]) for k, v in by.items()), key=lambda kv: -kv[1])
    return ", ".join(f"MADV_{ADVICE_NAMES.get(k, str(k))} x{n:,}" for k, n in parts[:3])
