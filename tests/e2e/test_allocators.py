"""The allocator registry against the real system."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from memsleuth.measure import allocators
from memsleuth.errors import UsageError
from conftest import fixture, memsleuth


def test_glibc_is_always_there_and_not_preloaded():
    g = allocators.glibc()
    assert g.preload is None and g.malloc_object.endswith("libc.so.6") and g.version != "unknown"
    assert allocators.available()[0].name == "glibc"


def test_distribution_allocators_have_versions():
    for a in allocators.available()[1:]:
        assert a.path and a.version and a.version != "unknown", a


def test_unknown_name_is_refused():
    with pytest.raises(UsageError, match="unknown allocator 'hoard'"):
        allocators.resolve("glibc,hoard")


def test_user_path_must_exist():
    with pytest.raises(UsageError, match="does not exist"):
        allocators.resolve("mine=/nonexistent/libmine.so")


def test_user_path_must_be_a_shared_object(tmp_path):
    text = tmp_path / "lib.so"
    text.write_text("not a library")
    with pytest.raises(UsageError, match="not an ELF"):
        allocators.resolve(f"mine={text}")
    # A position-independent executable is ET_DYN but does not load as a library.
    with pytest.raises(UsageError, match="does not load"):
        allocators.resolve(f"mine={fixture('fx-segv')}")


def test_user_shared_object_is_accepted_even_without_malloc():
    # Refused only if it cannot load; a missing malloc shows up as preload-failed in the run.
    (a,) = allocators.resolve(f"nomalloc={fixture('libfx-nomalloc.so')}")
    assert a.source == "user" and a.preload.endswith("libfx-nomalloc.so")
    assert allocators.check_preload(a.preload)["preload_ok"] is False


def test_duplicates_are_refused():
    with pytest.raises(UsageError, match="twice"):
        allocators.resolve("glibc,glibc")


LINKS_ITS_OWN = r"""
#include <stdlib.h>
#include <string.h>
int main(void) {
  char *big = malloc(32 << 20);       /* resident enough for the heap accounting */
  memset(big, 1, 32 << 20);
  long sum = 0;
  for (int i = 0; i < 200000; i++) {
    char *p = malloc(64 + i % 512);
    p[0] = (char)i;
    sum += p[0];
    free(p);
  }
  free(big);
  return sum == 12345;
}
"""


def test_check_runs_a_program_that_links_its_own_allocator_under_it(tmp_path):
    """A program linking libjemalloc ahead of libc (as Debian's redis does) mallocs from jemalloc:
    check without --alloc runs it as it is and says so, instead of failing glibc's preload check;
    its explaining run's heap accounting forwards to jemalloc. With --alloc glibc it is refused as
    before (glibc's malloc cannot reach it)."""
    jemalloc = next((a for a in allocators.available() if a.name == "jemalloc"), None)
    if jemalloc is None or shutil.which("gcc") is None:
        pytest.skip("needs gcc and libjemalloc2 (make setup installs it)")
    src, prog = tmp_path / "own.c", tmp_path / "own"
    src.write_text(LINKS_ITS_OWN)
    # -O0: the malloc/free pairs are not optimised away; no --as-needed: the library is linked
    subprocess.run(["gcc", "-O0", "-o", str(prog), str(src), "-Wl,--no-as-needed", jemalloc.path], check=True)
    js = tmp_path / "o.json"
    done = memsleuth("check", "--db", str(tmp_path / "c.db"), "--json", str(js), "--", str(prog))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "libjemalloc" in done.stderr and "not glibc's" in done.stderr and "under jemalloc" in done.stderr, \
        done.stderr
    cell = json.loads(js.read_text())["cells"][0]
    assert cell["allocator"]["name"] == "jemalloc" and cell["allocator"]["source"] == "program"
    assert cell["allocator"]["preloaded"] is False
    assert "the program's own" in done.stdout
    heaps = [s["heap"] for s in cell["samples"] if s.get("heap")]
    real = os.path.realpath(jemalloc.path)
    assert heaps and all(os.path.realpath(h["malloc_object"]) == real for h in heaps), heaps
    refused = memsleuth("check", "--db", str(tmp_path / "c.db"), "--alloc", "glibc", "--", str(prog))
    assert refused.returncode != 0 and "PRELOAD-FAILED" in refused.stdout, refused.stdout[-2000:]
