"""where.py reads perf script text: synthetic stacks, no perf needed."""
from __future__ import annotations

from memsleuth import where

STACKS = """prog 100 syscalls:sys_enter_madvise: 
\t          1234 __GI_madvise (/usr/lib/x86_64-linux-gnu/libc.so.6)
  madvise.c:10
\t          5678 [unknown] (/usr/lib/x86_64-linux-gnu/libmimalloc.so.2)
  libmimalloc.so.2[5678]
\t          1111 main (/tmp/prog)
  prog.c:42

prog 100 syscalls:sys_enter_madvise: 
\t          1234 __GI_madvise (/usr/lib/x86_64-linux-gnu/libc.so.6)
  madvise.c:10
\t          2222 release_block (/tmp/prog)
  prog.c:7

"""


def test_a_stripped_allocator_is_the_runtime_not_the_users_call_site():
    got = where.summarise(where.parse(STACKS), allocator="/usr/lib/x86_64-linux-gnu/libmimalloc.so.2")["madvise"]
    sites = dict((s, share) for s, share in got["user_sites"])
    assert sites == {"main (prog.c:42)": 0.5, "release_block (prog.c:7)": 0.5}
    assert got["through_allocator"] == 0.5   # one stack through the allocator's object, one straight from the program


def test_without_the_allocator_named_its_frame_would_pass_for_the_users():
    got = where.summarise(where.parse(STACKS))["madvise"]
    assert any("libmimalloc.so.2" in s for s, _ in got["user_sites"])
