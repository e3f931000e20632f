"""The allocator registry against the real system."""
from __future__ import annotations

import pytest

from memsleuth.measure import allocators
from memsleuth.errors import UsageError
from conftest import fixture


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
