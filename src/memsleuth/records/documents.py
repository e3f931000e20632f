"""What every reader of a stored JSON document shares: its fields over their defaults, and numbers
that are numbers (a document from another version, or a program's own output, may hold anything)."""
from __future__ import annotations


def with_defaults(doc: dict, defaults: dict) -> dict:
    """A document's fields over their defaults (a field it lacks or writes as null takes its default)."""
    return {**defaults, **{k: v for k, v in doc.items() if v is not None}}


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


def stack_documents(folder: str, prefix: str) -> list[dict]:
    """The per-process documents a sampler wrote in `folder` (PREFIX-PID.json, by name), each one
    that reads as JSON with a list of stacks; the others (cut short, not JSON) are left out."""
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
            docs.append(doc)
    return docs
