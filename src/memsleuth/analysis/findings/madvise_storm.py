"""madvise calls that cost material time, worded from their advice (the calls' arguments).

Only purging advice (DONTNEED, FREE, REMOVE) is "eager purging" (seed 003); populating advice
moves page faults into the call; MERGEABLE registers ranges with same-page merging; COLD and
PAGEOUT push pages towards reclaim; the rest are hints that change no memory. Without the
arguments (a region, or a run that did not record them) the finding names the calls and their
cost only, and says the advice was not recorded.
"""
from __future__ import annotations

from memsleuth.analysis.findings.base import Finding, mib
from memsleuth.analysis.cost import ADVICE_NAMES, advice_family, confidence_from_share
from memsleuth.events import MECHANISM_FLOORS
from memsleuth.records.cpu_profile import FAULT, when_key
from memsleuth.analysis.view import CellView
from memsleuth.units import PAGE_BYTES

# Fewer calls than this are housekeeping whatever they cost (a final trim, a loader's hints).
MIN_CALLS = MECHANISM_FLOORS["madvise"]

PURGE_ADVICE = {
    "jemalloc": "purge later: MALLOC_CONF=dirty_decay_ms:30000,muzzy_decay_ms:30000 (jemalloc 5's defaults are "
                "10000 and 0; -1 never purges, and resident memory then only grows)",
    "mimalloc": "purge later: raise MIMALLOC_PURGE_DELAY (MIMALLOC_RESET_DELAY before mimalloc 2.1), "
                "or -1 to never purge",
    "tcmalloc": "release less often: TCMALLOC_RELEASE_RATE=0 stops returning free spans to the kernel",
    "glibc": "trim less: GLIBC_TUNABLES=glibc.malloc.trim_threshold=<bytes larger than the churn> "
             "(glibc returns freed pages of secondary arenas and the heap top beyond it); a program calling "
             "malloc_trim() itself is not changed by any tunable: call it less often",
}
PURGE_GENERIC = "purge lazily: delay returning freed pages to the kernel, or batch it above a threshold of free pages"

# Per family: title, mechanism, advice. {n}: calls of the family, {mib}: their bytes.
WORDS = {
    "purge": ("Madvise storm: freed memory purged eagerly",
              "freed memory is handed back to the kernel with madvise ({advice}) {n} times ({mib}); every page "
              "purged and used again must be faulted in again",
              None),
    "prefault": ("Prefaulting with madvise",
                 "memory is populated ahead of use with madvise ({advice}) {n} times ({mib}): the calls take the page "
                 "faults that first touches would take; nothing is given back",
                 "that is work moved, not added: if it sits inside what you time, populate before the timed part; "
                 "populate each range once rather than per use"),
    "merge": ("Same-page merging hints with madvise",
              "ranges are registered with the kernel's same-page merging ({advice}) {n} times ({mib}): each call "
              "walks and splits the mappings; nothing is freed, and ksmd's scanning costs CPU outside this process",
              "register a range once (or not at all) instead of per allocation; check that KSM is wanted here"),
    "reclaim": ("Reclaim hints with madvise",
                "pages are pushed towards reclaim ({advice}) {n} times ({mib}): they leave memory and fault back in "
                "when touched again",
                "drop the hints on memory that is still in use, or issue them less often"),
    "huge pages": ("Huge-page hints with madvise",
                   "huge pages are requested, refused or collapsed ({advice}) {n} times ({mib})",
                   "give the hint once per range, at its creation"),
    "hint": ("Access hints with madvise",
             "the calls ({advice}, {n} of them) change no memory: their cost is the calls themselves",
             "give each hint once per range instead of per use, or drop it"),
    "other": ("madvise calls", "madvise is called with advice {advice} {n} times ({mib})",
              "make the calls less often"),
}


def check(view: CellView) -> list[Finding]:
    if (calling := view.calling("madvise", MIN_CALLS)) is None:
        return []
    sc, calls, split = calling
    trace = view.traced_for(sc)
    # Where the faults are traced by address, those that touch again what madvise purged are part
    # of its cost; otherwise they are only said to be possible.
    refault_ns, traced = view.refault_cost(sc, split, "madvise", 0.0) if trace is not None else (0.0, None)
    spent = split.cost("madvise") + refault_ns
    if not split.material(spent):
        return []
    where = "the process" if sc.name == "process" else f"region {sc.name}"
    families = view.advice_families() if view.describes(sc, "madvise") else {}
    how = ("the calls' own sampled time, plus the faults traced to the memory they purged"
           if split.profile is not None and trace is not None else
           "the calls' own sampled time" if split.profile is not None else
           "calls x their unit cost on this machine, plus the pages they released")
    evidence = [f"{calls:,.0f} madvise calls in {where} cost about {split.describe(spent)} ({how}; analysis/cost.py)"]
    if not families:
        evidence.append("their advice was not recorded (the calls' arguments come from `memsleuth check` or "
                        "`--where`), so what they do to memory is not stated")
        title, mechanism, advice, family = ("madvise calls cost kernel time",
                                            f"the process calls madvise {calls:,.0f} times", "see which advice they "
                                            "carry (`memsleuth check` records it) before changing anything", None)
    else:
        family = max(families, key=lambda f: _family_cost(f, *families[f], split.units))
        fam_calls, fam_bytes = families[family]
        names = _advice_names(view, family)
        title, words, advice = WORDS.get(family, WORDS["other"])
        mechanism = words.format(advice=names, n=f"{fam_calls:,.0f}", mib=mib(fam_bytes))
        whose = "" if sc.name == "process" else \
            f"; they are the whole process's, {view.args_cover(sc, 'madvise'):.0%} of whose calls are in {where}"
        evidence.append(f"advice by family ({view.args_source('madvise')}{whose}): " + "; ".join(
            f"{fam} {c:,.0f} calls ({_advice_names(view, fam)}), {mib(b)}"
            for fam, (c, b) in sorted(families.items(), key=lambda kv: -kv[1][0])))
        if family == "purge":
            advice = PURGE_ADVICE.get(view.allocator, PURGE_GENERIC)
    faults = sc.minflt
    if traced and refault_ns:
        evidence.append(f"{traced}: {refault_ns / 1e6:,.0f} ms of page faults")
    elif family == "purge" and faults:
        purged_pages = families["purge"][1] / PAGE_BYTES
        refault_ns = min(view.refault_bound(sc), purged_pages) * split.units.fault_ns * split.scale
        evidence.append(f"{faults:,.0f} page faults in the same span ({faults / calls:.2f} per call); if they are the "
                        f"purged pages touched again they add about {refault_ns / 1e6:,.0f} ms (whether they land in "
                        "the purged ranges is not measured)")
    phase = view.phase("madvise", when_key(FAULT, release="madvise")) if sc.name == "process" else None
    if phase:
        evidence.append(phase.text)
    share = split.share(spent)
    return [Finding(
        id="madvise-storm" if family == "purge" else "madvise-calls",
        title=f"{title}: {split.describe(spent)}", mechanism=mechanism, evidence=evidence, advice=advice,
        subject=view.label, confidence=confidence_from_share(share, confirmed=bool(families)),
        numbers={"madvise": calls, "family": family, "families": families, "minflt": faults,
                 "sys_share": sc.sys_share},
        calls="madvise", cost_ns=spent, cost_share=share, phase=phase.name if phase else None)]


def _family_cost(family: str, calls: float, nbytes: float, units) -> float:
    """A family's estimated kernel time (analysis/cost.py's unit costs): its calls, plus the pages
    it gives back (purge, reclaim) or faults in (prefault). Picks the family whose words lead."""
    pages = nbytes / PAGE_BYTES
    per_page = units.release_page_ns if family in ("purge", "reclaim") else units.fault_ns \
        if family == "prefault" else 0.0
    return calls * units.syscall("madvise") + pages * per_page


def _advice_names(view: CellView, family: str) -> str:
    s = view.explain_sample
    madvise = s.syscall_args.of("madvise") if s else None
    parts = []
    for k, (n, _) in madvise.by_advice.items() if madvise else ():
        if advice_family(k) == family:
            parts.append((n, f"MADV_{ADVICE_NAMES.get(k, str(k))}"))
    return ", ".join(f"{name} x{n:,.0f}" for n, name in sorted(parts, reverse=True)[:3]) or family
