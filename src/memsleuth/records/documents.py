"""What every reader of a stored JSON document shares: its fields over their defaults, and numbers
that are numbers (a document from another version, or a program's own output, may hold anything)."""
from __future__ import annotations

import math


# A sampler's per-process document (a line of cpu.jsonl or sites.jsonl: native/launcher/msr_sites.c,
# native/heap/ms_sites.c): each field its readers take, with its value where the document lacks it;
# and each of its events'.
SAMPLER_DEFAULTS = {"stacks": [], "events": [], "comm": "?", "pid": None, "maps": [], "async": 0, "sampled_by": None,
                    "when_bucket_ns": 0, "when_span_ns": 0}
EVENT_DEFAULTS = {"name": None, "opened": False, "why": None, "period": 1}


def with_defaults(doc: dict, defaults: dict) -> dict:
    """A document's fields over their defaults (a field it lacks or writes as null takes its default)."""
    return {**defaults, **{k: v for k, v in doc.items() if v is not None}}


def of_type(doc: dict, key: str, kind: type | tuple[type, ...], default=None):
    """A document's field where it is of the kind its readers need (a list, a dict), else `default`."""
    v = doc[key] if key in doc else None
    return v if isinstance(v, kind) else default


def number_in(doc: dict, key: str, default: float | None = None) -> float | None:
    """A document's field as a float where it is a finite number (not a bool), else `default`."""
    v = number(doc[key]) if key in doc else None
    return default if v is None or not math.isfinite(v) else v


def number(v) -> float | None:
    """v as a float when it is a number (not a bool), else None."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def add_buckets(row: list[int], pairs) -> None:
    """Adds a stack's samples by bucket of time, as ms-run writes them ([bucket, samples, ...], the
    empty buckets left out: msr_when.h), into `row` (samples per bucket, grown as needed)."""
    pairs = pairs if isinstance(pairs, list) else []
    for b, k in zip(pairs[::2], pairs[1::2]):
        b = int(b)
        if b >= len(row):
            row.extend([0] * (b + 1 - len(row)))
        row[b] += int(k)


def stack_fields(st) -> tuple[int, int, list, list, int] | None:
    """One stack of a sampler's document as (event, samples, addresses innermost first, [bucket,
    samples, ...], the leaf's return address or 0), or None where it is not one. ms-run writes
    [event, samples, [address, ...]], then the buckets where timed (or a return address follows),
    then the word at the stack pointer where it may be the innermost function's return address
    (msr_sites.c: leaf_return)."""
    if not isinstance(st, list) or not 3 <= len(st) <= 5 or not isinstance(st[0], int) \
            or not isinstance(st[1], int) or not isinstance(st[2], list) \
            or not all(isinstance(a, int) for a in st[2]):       # a cut or foreign document: not a stack
        return None
    when = st[3] if len(st) > 3 and isinstance(st[3], list) else []
    ret = st[4] if len(st) == 5 and isinstance(st[4], int) and not isinstance(st[4], bool) else 0
    return st[0], st[1], st[2], when, ret


def stack_addresses(doc: dict) -> list[int]:
    """Every address a document's stacks name: their frames, and their leaves' return addresses."""
    out: list[int] = []
    for st in doc["stacks"]:
        fields = stack_fields(st)
        if fields is not None:
            out += fields[2] + ([fields[4]] if fields[4] else [])
    return out


def _jsonl(folder: str, prefix: str) -> str:
    """The text of a run's PREFIX.jsonl in `folder` ("" where there is none)."""
    import os
    try:
        with open(os.path.join(folder, f"{prefix}.jsonl"), encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def run_documents(folder: str, prefix: str) -> list[dict]:
    """The per-process documents of one kind that a run's processes and ms-run wrote in `folder`:
    the lines of PREFIX.jsonl, one document each (native/probe/ms_json.h: msj_append_line), in
    the order written; a line that does not read as a JSON object (cut short by a kill, foreign) is
    left out."""
    import json
    docs = []
    for line in _jsonl(folder, prefix).split("\n"):
        if line.strip():
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict):
                docs.append(doc)
    return docs


def documents_pids(folder: str, prefix: str) -> list[int]:
    """The pids a run's documents of one kind are of (their leading "pid" field, read without
    parsing the rest: a document cut short names its process too)."""
    import re
    return [int(m.group(1)) for m in re.finditer(r'^\{\s*"pid"\s*:\s*(\d+)', _jsonl(folder, prefix), re.M)]


def stack_documents(folder: str, prefix: str) -> list[dict]:
    """The per-process documents a sampler wrote in `folder` (run_documents), each one with a list
    of stacks, over SAMPLER_DEFAULTS (its events over EVENT_DEFAULTS), by pid. Where a process has
    the in-program sampler's document, ms-run's for the same pid (a pid reused: "sampled_by":
    "kernel") is left out: the program's own is better unwound."""
    docs = []
    for doc in run_documents(folder, prefix):
        if isinstance(doc.get("stacks"), list):
            doc = with_defaults(doc, SAMPLER_DEFAULTS)
            events = doc["events"] if isinstance(doc["events"], list) else []
            doc["events"] = [with_defaults(e if isinstance(e, dict) else {}, EVENT_DEFAULTS) for e in events]
            docs.append(doc)

    def pid(d: dict) -> int | None:
        return d["pid"] if isinstance(d["pid"], int) and not isinstance(d["pid"], bool) else None
    own = {pid(d) for d in docs if d["sampled_by"] != "kernel"}
    docs = [d for d in docs if d["sampled_by"] != "kernel" or pid(d) is None or pid(d) not in own]
    return sorted(docs, key=lambda d: (str(d["pid"]), str(d["sampled_by"])))
