"""Size arguments shown as they are typed, and parsed back to the same bytes."""
from __future__ import annotations

import pytest

from memsleuth.units import fmt_size_arg, parse_size_bytes


@pytest.mark.parametrize("n,text", [(4194304, "4M"), (1 << 30, "1G"), (1536, "1536"), (3 << 10, "3K"),
                                    ("4194304,1048576", "4M,1M"), ("abc", "abc")])
def test_sizes_read_as_typed_and_parse_back(n, text):
    assert fmt_size_arg(n) == text
    if text.replace(",", "").isalnum() and text != "abc":
        for part, value in zip(text.split(","), str(n).split(",")):
            assert parse_size_bytes(part) == int(value)
