"""What every reader of a stored JSON document shares: its fields over their defaults, and numbers
that are numbers (a document from another version, or a program's own output, may hold anything)."""
from __future__ import annotations


def with_defaults(doc: dict, defaults: dict) -> dict:
    """A document's fields over their defaults (a field it lacks or writes as null takes its default)."""
    return {**defaults, **{k: v for k, v in doc.items() if v is not None}}


def number(v) -> float | None:
    """v as a float when it is a number (not a bool), else None."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
