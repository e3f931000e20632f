"""compare --variant: environment settings as a dimension, applied only to the allocators that read them."""
from __future__ import annotations

import json

import pytest

from memsleuth.measure import allocators
from memsleuth.errors import UsageError
from memsleuth.measure.plan import EnvVariant
from conftest import memsleuth


def test_parsing_keeps_values_with_commas_and_knows_owners():
    v = EnvVariant.parse("nodecay:MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0,FOO=1")
    assert v.env == {"MALLOC_CONF": "dirty_decay_ms:0,muzzy_decay_ms:0", "FOO": "1"}
    assert v.applies_to("jemalloc") and not v.applies_to("glibc")
    g = EnvVariant.parse("arena1:GLIBC_TUNABLES=glibc.malloc.arena_max=1")
    assert g.applies_to("glibc") and not g.applies_to("mimalloc")
    assert EnvVariant.parse("any:MY_APP_SETTING=3").applies_to("tcmalloc")
    for bad in ("noname", ":A=1", "default:A=1", "x:", "x:GLIBC_TUNABLES=garbage", "bad name:A=1"):
        with pytest.raises(UsageError):
            EnvVariant.parse(bad)


def test_variants_run_interleaved_with_the_allocators_they_apply_to(tmp_path):
    names = [a.name for a in allocators.available() if a.name in ("glibc", "mimalloc")]
    js = tmp_path / "v.json"
    proc = memsleuth("compare", "--alloc", ",".join(names), "--reps", "6", "--db", str(tmp_path / "v.db"),
                     "--json", str(js), "--param", "iterations=100000", "--param", "ws=1000",
                     "--variant", "arena1:GLIBC_TUNABLES=glibc.malloc.arena_max=1",
                     "--variant", "nopurge:MIMALLOC_PURGE_DELAY=-1")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(js.read_text())
    contenders = sorted((c["allocator"]["name"], c["params"]["variant"]) for c in doc["cells"])
    expected = [("glibc", "arena1"), ("glibc", "default")]
    if "mimalloc" in names:
        expected += [("mimalloc", "default"), ("mimalloc", "nopurge")]
        assert "variant arena1: GLIBC_TUNABLES=glibc.malloc.arena_max=1; does not apply to mimalloc: skipped" \
            in proc.stdout
    assert contenders == sorted(expected)
    arena = next(c for c in doc["cells"] if c["params"]["variant"] == "arena1")
    assert arena["env"]["GLIBC_TUNABLES"] == "glibc.malloc.arena_max=1"
    # All contenders of one parameter set are one group: one of them is the fastest.
    assert sum(c["summary"]["is_best"] for c in doc["cells"]) == 1
    assert "glibc+arena1" in proc.stdout and "Tuning," in proc.stdout


def test_bad_variants_are_refused(tmp_path):
    for args, needle in ((["--variant", "a:X=1", "--variant", "a:Y=2"], "same name"),
                         (["--variant", "x"], "NAME:KEY=VALUE")):
        proc = memsleuth("compare", "--db", str(tmp_path / "b.db"), *args)
        assert proc.returncode == 2 and needle in proc.stderr, proc.stderr
