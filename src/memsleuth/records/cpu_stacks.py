"""The user call chains of the explaining run's CPU samples (ms-run `--cpu-stacks-dir`): the
cpu-clock sampled on every thread of the tree at the CPU profile's period, each sample with the
thread's user chain (walked by frame pointers: Go keeps them, C built without them gives its
innermost frame) and the mode it was taken in: in user mode the chain is what ran; in the kernel it
is where the program entered it. Read once, when the run ends (the processes' mappings and perf
maps are still there), into named stacks; who ran them is decided in analysis/user_time.py.

A stack keeps its innermost KEEP_INNER and outermost KEEP_OUTER frames (what ran, and the thread's
entry: a collector's worker is named by its outermost frames); at most MAX_STACKS distinct stacks
are kept, the most sampled first, the rest counted as `cut`."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from memsleuth.records import documents

KEEP_INNER = 24
KEEP_OUTER = 8
MAX_STACKS = 2000
KERNEL_EVENT = "cpu-clock:kernel"
# The stored document's fields (CpuStacks.to_dict), with their values where it lacks them.
STORED_DEFAULTS = {"stacks": [], "period_ns": 0, "samples": 0, "kernel": 0, "cut": 0, "why": "",
                   "when_bucket_ns": 0, "when_span_ns": 0}
# What ms-run's own document says of the sampler.
SUMMARY_DEFAULTS = {"why": "", "opened": None, "cut_stacks": 0}


@dataclass(frozen=True)
class UserStack:
    executable: str
    in_kernel: bool             # the sample was taken in the kernel (the chain is where it was entered)
    samples: int
    functions: tuple[str, ...]  # innermost first; a frame without a symbol is '[object]'
    when: tuple[int, ...] = ()  # its samples by bucket of CpuStacks.when_bucket_ns (empty: not kept)


@dataclass(frozen=True)
class CpuStacks:
    period_ns: int
    samples: int                # every CPU sample the sampler took (both modes)
    kernel: int                 # of those, taken in the kernel
    stacks: tuple[UserStack, ...]
    cut: int = 0                # samples in stacks not kept (MAX_STACKS, or ms-run's own table)
    why: str = ""               # why there are none, or what could not be named
    when_bucket_ns: int = 0     # the stacks' buckets of time from the run's first record (msr_when.h)
    when_span_ns: int = 0

    @property
    def usable(self) -> bool:
        return self.samples > 0 and not (self.why and not self.stacks)

    def to_dict(self) -> dict:
        names = sorted({f for s in self.stacks for f in s.functions})
        index = {n: i for i, n in enumerate(names)}
        return {"period_ns": self.period_ns, "samples": self.samples, "kernel": self.kernel, "cut": self.cut,
                "why": self.why, "functions": names,
                "when_bucket_ns": self.when_bucket_ns, "when_span_ns": self.when_span_ns,
                "stacks": [[s.executable, int(s.in_kernel), s.samples, [index[f] for f in s.functions], list(s.when)]
                           for s in self.stacks]}

    @classmethod
    def from_dict(cls, d) -> "CpuStacks | None":
        """The stored document, or None where it is not one (an older run, ms-run's bare summary)."""
        if not isinstance(d, dict) or documents.of_type(d, "functions", list) is None:
            return None
        d = documents.with_defaults(d, STORED_DEFAULTS)
        try:
            names = [str(n) for n in d["functions"]]
            stacks = tuple(UserStack(str(exe), bool(k), int(n), tuple(names[int(i)] for i in idx),
                                     tuple(int(x) for x in (when[0] if when else ())))
                           for exe, k, n, idx, *when in d["stacks"])
            return cls(period_ns=int(d["period_ns"]), samples=int(d["samples"]), kernel=int(d["kernel"]),
                       stacks=stacks, cut=int(d["cut"]), why=str(d["why"]), when_bucket_ns=int(d["when_bucket_ns"]),
                       when_span_ns=int(d["when_span_ns"]))
        except (TypeError, ValueError, IndexError):
            return None


# A frame of memsleuth's own preloads (heap accounting, the call-site sampler) in the explaining run:
# named so, so that no part of the program's time is theirs (libmsheap's malloc is not the allocator's).
OWN = "[memsleuth's own] "
OWN_OBJECTS = ("libmsheap.so", "libmssites.so")


def _name(f) -> str:
    name = f.function if f.function else f"[{f.object}]"
    return OWN + name if f.object in OWN_OBJECTS else name


def _kept(functions: list[str]) -> tuple[str, ...]:
    if len(functions) <= KEEP_INNER + KEEP_OUTER:
        return tuple(functions)
    return tuple(functions[:KEEP_INNER] + functions[-KEEP_OUTER:])


def read(folder: str, summary: dict | None, period_ns: int) -> CpuStacks:
    """The named stacks of the documents ms-run wrote in `folder` (cpu.jsonl); `summary`: what
    ms-run's own document says of the sampler (whether it opened, its cut stacks)."""
    summary = documents.with_defaults(summary if isinstance(summary, dict) else {}, SUMMARY_DEFAULTS)
    docs = documents.stack_documents(folder, "cpu")
    if not docs:
        why = str(summary["why"]) or ("the sampler did not open" if summary["opened"] is False
                                                 else "no process of the tree was sampled")
        return CpuStacks(period_ns, 0, 0, (), why=why)
    from memsleuth.records import calls, symbols     # the naming's imports only where a run is read
    notes: list[str] = []
    named = symbols.resolve(docs, documents.stack_addresses, notes=notes)
    counts: Counter = Counter()
    when: dict[tuple, list[int]] = {}
    total = kernel = 0
    for d_i, d in enumerate(docs):
        events = [e["name"] for e in d["events"]]
        exe = str(d["comm"] or "?")
        for st in d["stacks"]:
            fields = documents.stack_fields(st)
            if fields is None or not 0 <= fields[0] < len(events):
                continue
            ev, n, addresses, buckets, ret = fields
            in_kernel = events[ev] == KERNEL_EVENT
            functions = [_name(f) for f in calls.chain(named, d_i, addresses, ret)]
            key = (exe, in_kernel, _kept(functions))
            counts[key] += n
            documents.add_buckets(when.setdefault(key, []), buckets)
            total += n
            kernel += n if in_kernel else 0
    kept = counts.most_common(MAX_STACKS)
    cut = total - sum(n for _, n in kept) + int(summary["cut_stacks"])
    stacks = tuple(UserStack(exe, k, n, fns, tuple(when[exe, k, fns])) for (exe, k, fns), n in kept)
    return CpuStacks(period_ns, total + int(summary["cut_stacks"]), kernel, stacks, cut=cut,
                     why="; ".join(notes), when_bucket_ns=int(docs[0]["when_bucket_ns"]),
                     when_span_ns=max(int(d["when_span_ns"]) for d in docs))
