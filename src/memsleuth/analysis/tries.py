"""The changes a finding's advice names, as runnable candidates for `check --try`: one table.

Each entry maps a finding id to the candidates worth measuring against the program as it ran:
a glibc tunable, an allocator option, or another allocator. Each candidate names the counts whose
change shows whether the mechanism went away (gate.COUNTS names), so the trial can say "madvise
calls 112,000 -> 112,000: no effect" as well as what happened to time and peak RSS. A candidate is
only ever a hypothesis: `check --try` measures it, and advice shown without --try is marked untried.
What no setting can change (a program that calls malloc_trim itself, its own loop) has no
candidate; its advice stays a change to the program's code.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from memsleuth.analysis import runtimes
from memsleuth.analysis.findings.base import Finding
from memsleuth.records.documents import with_defaults

# Environment variables that hold a runtime's list of options: a candidate's option is appended to
# the program's own (commands/check.py), never put in their place.
OPTIONS_VARIABLES = ("NODE_OPTIONS", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS")

GIB = 1 << 30
MIB = 1 << 20


# A change that addresses a time finding and a memory one (tcmalloc for thread arenas' mprotect calls and
# for the memory they keep) is judged on both costs: it helps where either went down and neither up.
BOTH = "time and peak RSS"


@dataclass(frozen=True)
class Try:
    name: str                                  # how reports name it: "trim_threshold=1G", "mimalloc"
    finding: str                               # the finding id it addresses
    evidence: tuple[str, ...]                  # gate.COUNTS metrics that show whether the mechanism went away
    tunables: tuple[str, ...] = ()             # GLIBC_TUNABLES entries, appended to the program's own
    env: dict[str, str] = field(default_factory=dict)   # other environment (allocator options)
    allocator: str | None = None               # another allocator instead of the one measured
    # the cost the finding is about: "time" or "peak RSS"; BOTH for a change that addresses a finding of each
    primary: str = "time"
    # Every finding it addresses with that finding's own evidence (one candidate can address two
    # findings: trim_threshold for heap-trim churn and for a madvise storm).
    addresses: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def __post_init__(self):
        if not self.addresses:
            object.__setattr__(self, "addresses", ((self.finding, tuple(self.evidence)),))

    def merged(self, other: "Try") -> "Try":
        """The same change addressing the other's findings too: their evidence joined."""
        addresses = self.addresses + tuple(a for a in other.addresses if a not in self.addresses)
        evidence = tuple(dict.fromkeys(m for _, ms in addresses for m in ms))
        finding = ", ".join(dict.fromkeys(f for f, _ in addresses))
        primary = self.primary if self.primary == other.primary else BOTH
        return Try(self.name, finding, evidence, self.tunables, self.env, self.allocator, primary, addresses)

    @property
    def key(self) -> tuple:
        return (self.tunables, tuple(sorted(self.env.items())), self.allocator)

    def to_dict(self) -> dict:
        return {"name": self.name, "finding": self.finding, "evidence": list(self.evidence),
                "tunables": list(self.tunables), "env": dict(self.env), "allocator": self.allocator,
                "primary": self.primary, "addresses": [[f, list(ms)] for f, ms in self.addresses]}

    @classmethod
    def from_dict(cls, d: dict) -> "Try":
        d = with_defaults(d, {"evidence": (), "tunables": (), "env": {}, "allocator": None, "primary": "time",
                              "addresses": ()})
        return cls(str(d["name"]), str(d["finding"]), tuple(d["evidence"]), tuple(d["tunables"]), dict(d["env"]),
                   d["allocator"], str(d["primary"] or "time"), tuple((str(f), tuple(ms)) for f, ms in d["addresses"]))


def _glibc(name: str, finding: str, evidence: tuple[str, ...], *tunables: str, primary: str = "time") -> Try:
    return Try(name, finding, evidence, tunables=tunables, primary=primary)


# Options each allocator reads to purge (give freed memory back) later or never.
PURGE_LATER = {
    "mimalloc": {"MIMALLOC_PURGE_DELAY": "10000", "MIMALLOC_RESET_DELAY": "10000"},   # 2.1+, and 2.0's name
    "jemalloc": {"MALLOC_CONF": "dirty_decay_ms:30000,muzzy_decay_ms:30000"},     # above 5.x's 10000 and 0
    "tcmalloc": {"TCMALLOC_RELEASE_RATE": "0"},
}
OTHER_ALLOCATORS = ("mimalloc", "jemalloc", "tcmalloc", "glibc")


def _heap_trim(f: Finding, allocator: str) -> list[Try]:
    ev = ("brk calls", "page faults")
    if allocator != "glibc":
        return []
    return [_glibc("trim_threshold=1G", f.id, ev, f"glibc.malloc.trim_threshold={GIB}"),
            _glibc("top_pad=64M", f.id, ev, f"glibc.malloc.top_pad={64 * MIB}")]


# The largest mmap_threshold glibc takes on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX, HEAP_MAX_SIZE / 2):
# above it the tunable is ignored, whatever `ld.so --list-tunables` allows.
MMAP_THRESHOLD_MAX = 32 * MIB


def _mmap_churn(f: Finding, allocator: str) -> list[Try]:
    if allocator != "glibc":
        return []
    ev = ("mmap calls", "munmap calls", "page faults")
    block = mmap_block_bytes(f)
    if block is not None and block >= MMAP_THRESHOLD_MAX:
        # No threshold keeps such a block: serve every block from the heap, and keep the heap's top.
        keep = max(GIB, 1 << (int(2 * block) - 1).bit_length())
        return [_glibc(f"mmap_max=0,trim_threshold={keep // MIB}M", f.id, ev, "glibc.malloc.mmap_max=0",
                       f"glibc.malloc.trim_threshold={keep}")]
    return [_glibc("mmap_threshold=32M", f.id, ev, f"glibc.malloc.mmap_threshold={MMAP_THRESHOLD_MAX}")]


def mmap_block_bytes(f: Finding) -> float | None:
    """The size of the blocks an mmap-churn finding's munmap calls give back: the size class that
    carries most of the bytes, else the average, when recorded."""
    unmapped, calls = f.numbers["unmapped_bytes"], f.numbers["munmap"]
    return f.numbers["block_bytes"] or (unmapped / calls if unmapped and calls else None)


def _madvise_storm(f: Finding, allocator: str) -> list[Try]:
    ev = ("madvise calls", "page faults")
    if allocator == "glibc":
        return [_glibc("trim_threshold=1G", f.id, ev, f"glibc.malloc.trim_threshold={GIB}")]
    if allocator in PURGE_LATER:
        return [Try(f"{allocator}: purge later", f.id, ev, env=PURGE_LATER[allocator])]
    return []


def _first_touch(f: Finding, allocator: str) -> list[Try]:
    if allocator != "glibc":
        return []
    # glibc 2.35+: malloc asks for transparent huge pages (madvise) on the memory it maps.
    return [_glibc("hugetlb=1 (THP)", f.id, ("page faults",), "glibc.malloc.hugetlb=1")]


def _rss_blowup(f: Finding, allocator: str) -> list[Try]:
    if allocator != "glibc":
        return []
    ev = ("peak RSS", "time-averaged RSS")
    return [_glibc("arena_max=1", f.id, ev, "glibc.malloc.arena_max=1", primary="peak RSS"),
            _glibc("arena_max=2", f.id, ev, "glibc.malloc.arena_max=2", primary="peak RSS")]


def _heap_overhead(f: Finding, allocator: str) -> list[Try]:
    if allocator != "glibc" or not (f.numbers["arenas"] or 0) >= 2:
        return []
    ev = ("peak RSS", "time-averaged RSS")
    return [_glibc("arena_max=1", f.id, ev, "glibc.malloc.arena_max=1", primary="peak RSS"),
            _glibc("arena_max=2", f.id, ev, "glibc.malloc.arena_max=2", primary="peak RSS")]


def _arena_growth(f: Finding, allocator: str) -> list[Try]:
    """mprotect calls glibc makes growing its thread arenas (mprotect_calls.made_by_allocator): fewer
    arenas, so that threads use the main one, which grows by brk."""
    if allocator != "glibc" or f.who != "allocator" or not f.numbers["glibc_arenas"]:
        return []
    ev = ("mprotect calls",)
    return [_glibc("arena_max=1", f.id, ev, "glibc.malloc.arena_max=1"),
            _glibc("arena_max=2", f.id, ev, "glibc.malloc.arena_max=2")]


TRIES = {
    "heap-overhead": _heap_overhead,
    "mprotect-calls": _arena_growth,
    "heap-retained": _heap_overhead,
    "heap-trim-churn": _heap_trim,
    "mmap-churn": _mmap_churn,
    "madvise-storm": _madvise_storm,
    "first-touch": _first_touch,
    "rss-blowup": _rss_blowup,
}
# Findings a different allocator may remove (its own purging, locking or heap policy): each
# other installed allocator is a candidate too.
ALLOCATOR_SENSITIVE = {"heap-trim-churn": ("brk calls", "page faults"),
                       "mmap-churn": ("mmap calls", "munmap calls", "page faults"),
                       "madvise-storm": ("madvise calls", "page faults"),
                       "lock-contention": ("futex calls",),
                       "rss-blowup": ("peak RSS", "time-averaged RSS"),
                       "heap-overhead": ("peak RSS", "time-averaged RSS"),
                       "heap-retained": ("time-averaged RSS", "peak RSS"),
                       "allocator-time": ("peak RSS",),
                       "mprotect-calls": ("mprotect calls",)}
# The findings an allocator compiled into the program changes by purging later (PURGE_LATER's settings).
BUILT_IN_PURGES = ("madvise-storm", "mmap-churn", "heap-trim-churn")


def built_in_purge_later(allocator: str) -> dict[str, str]:
    """PURGE_LATER's environment for an allocator compiled into the program (empty: none known):
    Rust's tikv-jemallocator reads its prefixed _RJEM_MALLOC_CONF, a C program's jemalloc MALLOC_CONF."""
    env = dict(PURGE_LATER.get(allocator, {}))
    if "MALLOC_CONF" in env:
        env["_RJEM_MALLOC_CONF"] = env["MALLOC_CONF"]
    return env
# Of those, the findings another allocator can change only where the allocator makes their calls or
# spends their time (the call sites said so: summary.with_call_sites).
ALLOCATOR_MADE_ONLY = ("allocator-time", "mprotect-calls")



# Findings about memory, not time: a candidate is judged on peak RSS.
MEMORY_FINDINGS = ("rss-blowup", "heap-overhead", "heap-retained")


# The JVM's default maximum heap: this share of the machine's memory (MaxRAMPercentage's default).
JVM_DEFAULT_HEAP_SHARE = 0.25


def max_heap(command: list[str] | None, mem_bytes: float | None) -> str | None:
    """The JVM's maximum heap as an -Xms value: the command's last -Xmx, else the default
    (JVM_DEFAULT_HEAP_SHARE of the machine's memory, in MiB); None when neither is known."""
    import re
    sizes = [m.group(1) for a in command or () if (m := re.fullmatch(r"-Xmx(\d+[kKmMgGtT]?)", a))]
    if sizes:
        return sizes[-1]
    return f"{int(mem_bytes * JVM_DEFAULT_HEAP_SHARE) >> 20}m" if mem_bytes else None


def _runtime_env(env: tuple[tuple[str, str], ...], command: list[str] | None,
                 mem_bytes: float | None) -> dict[str, str] | None:
    """A runtime knob's environment with {max_heap} filled from the command; None when it cannot be."""
    out = {}
    for k, v in env:
        if "{max_heap}" in v:
            heap = max_heap(command, mem_bytes)
            if heap is None:
                return None
            v = v.replace("{max_heap}", heap)
        out[k] = v
    return out


def for_findings(found: list[Finding], allocator: str, installed: list[str], command: list[str] | None = None,
                 mem_bytes: float | None = None) -> list[Try]:
    """Every candidate the findings name, once each (by what it changes), in the findings' order.
    `command` and `mem_bytes` (the machine's memory) fill in a runtime knob that depends on them."""
    out: dict[tuple, Try] = {}
    for f in found:
        if f.who == "program":
            continue        # the program makes the calls itself: no setting changes them
        rt = runtimes.by_name(f.numbers["runtime"]) if f.who == "runtime" else None
        if rt is not None and f.id == "garbage-collection":
            # Its collector: the runtime's own knob, judged on time, its memory shown (collecting less
            # often keeps more garbage).
            if rt.try_gc:
                name, env = rt.try_gc
                t = Try(name, f.id, ("peak RSS",), env=dict(env))
                out[t.key] = out[t.key].merged(t) if t.key in out else t
            continue
        if rt is not None and f.id == "lock-contention":
            continue        # the runtime's own locks (CPython's GIL): no allocator or tunable reaches them
        if rt is not None and rt.own_memory and not f.numbers["via_malloc"]:
            # A runtime's own heap: neither another allocator nor glibc's tunables reach it; its own
            # release knob, where it is an environment setting, does.
            # (a heap that shrinks and grows again faults in what it gave back: churn findings too)
            if rt.try_release and f.id in runtimes.RELEASE_FINDINGS + runtimes.CHURN_FINDINGS:
                name, env = rt.try_release
                filled = _runtime_env(env, command, mem_bytes)
                if filled is not None:
                    t = Try(name, f.id, ("page faults",), env=filled)   # the calls stay; the re-faults go
                    out[t.key] = out[t.key].merged(t) if t.key in out else t
            continue
        built = f.numbers["built_in_allocator"]
        if built:
            # An allocator compiled into the program (summary.with_call_sites): neither glibc's tunables
            # nor a preloaded allocator reach its calls; its own settings, read from the environment, do.
            env = built_in_purge_later(built)
            if env and f.id in BUILT_IN_PURGES:
                t = Try(f"{built} (built in): purge later", f.id, ALLOCATOR_SENSITIVE[f.id], env=env)
                out[t.key] = out[t.key].merged(t) if t.key in out else t
            continue
        found_tries = list(TRIES.get(f.id, lambda *_: [])(f, allocator))
        if f.id in ALLOCATOR_SENSITIVE and not (f.id in ALLOCATOR_MADE_ONLY and f.who != "allocator"):
            found_tries += [Try(other, f.id, ALLOCATOR_SENSITIVE[f.id], allocator=other,
                                primary="peak RSS" if f.id in MEMORY_FINDINGS else "time")
                            for other in OTHER_ALLOCATORS if other != allocator and other in installed]
        for t in found_tries:
            out[t.key] = out[t.key].merged(t) if t.key in out else t
    return list(out.values())


# --try's budget by default: this many times the program's own time (its measured runs' median), and
# never less than BUDGET_MIN_S. The candidates' session runs the baseline and each candidate once a
# round, after one warm-up each, for at least MIN_ROUNDS rounds (the fewest with a 95% CI).
BUDGET_FACTOR = 20.0
BUDGET_MIN_S = 60.0
MIN_ROUNDS = 6
# What one run costs beside the program's own time (ms-run's start, the store): seconds.
RUN_OVERHEAD_S = 0.3


def program_seconds(samples: list) -> float:
    """The program's own time as the budget reads it: its ok measured runs' median wall time."""
    from statistics import median
    walls = [s.wall_ns for s in samples if s.ok]
    return median(walls) / 1e9 if walls else 0.0


def default_budget(run_s: float) -> float:
    return max(BUDGET_MIN_S, BUDGET_FACTOR * run_s)


def fit(candidates: list, run_s: float, budget_s: float, max_rounds: int) -> tuple[list, list, int]:
    """(the candidates that fit the budget, those left out, the rounds at most): with the baseline,
    one warm-up each and at least MIN_ROUNDS rounds; candidates are left out from the last (the
    table's order is the findings' costliest first) until MIN_ROUNDS fit; rounds beyond that are
    capped by what the budget holds."""
    per_run = max(run_s, 0.0) + RUN_OVERHEAD_S
    kept = list(candidates)
    while kept:
        cells = 1 + len(kept)
        rounds = int(budget_s // (cells * per_run)) - 1          # one warm-up round of every cell
        if rounds >= MIN_ROUNDS:
            return kept, list(candidates[len(kept):]), min(rounds, max_rounds)
        kept.pop()
    return [], list(candidates), 0
