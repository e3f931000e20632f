"""What every reader of a stored JSON document shares: its fields over their defaults, and numbers
that are numbers (a document from another version, or a program's own output, may hold anything)."""
from __future__ import annotations

import math


# A sampler's per-process document (cpu-PID.json, sites-PID.json: native/launcher/msr_sites.c): each
# field its readers take, with its value where the document lacks it; and each of its events'.
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


def stack_documents(folder: str, prefix: str) -> list[dict]:
    """The per-process documents a sampler wrote in `folder` (PREFIX-PID.json, by name), each one
    that reads as JSON with a list of stacks, over SAMPLER_DEFAULTS (its events over EVENT_DEFAULTS);
    the others (cut short, not JSON) are left out."""
    import glob
    import json
    import os
    docs = []
    for path in sorted(glob.glob(os.path.join(folder, f"{prefix}-*.json"))):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                doc = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("stacks"), list):
            doc = with_defaults(doc, SAMPLER_DEFAULTS)
            events = doc["events"] if isinstance(doc["events"], list) else []
            doc["events"] = [with_defaults(e if isinstance(e, dict) else {}, EVENT_DEFAULTS) for e in events]
            docs.append(doc)
    return docs
