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


def test_periods_aim_at_target_samples_whatever_the_length():
    from memsleuth import where
    got = where.periods({"page-faults": 4_000_000, "madvise": 120, "munmap": 0, "brk": 1})
    assert got == {"page-faults": 4_000_000 // where.TARGET_SAMPLES, "madvise": 1, "brk": 1}
    assert where.sites_spec(got) == f"page-faults={4_000_000 // where.TARGET_SAMPLES},madvise=1,brk=1"


def test_a_storms_arguments_are_sampled_with_a_prime_period_never_below_the_minimum():
    from memsleuth import runner
    assert runner.args_every({"madvise": runner.ARGS_RECORDS}) == {}            # every call up to the target
    got = runner.args_every({"madvise": 40_000, "munmap": 50 * runner.ARGS_RECORDS, "brk": 10**7})
    assert got["madvise"] == runner.MIN_ARGS_EVERY                            # 2 would alias a 2-call pattern
    assert got["munmap"] == 53                                                 # the first prime >= 50
    assert "brk" not in got                                                    # its moves are read in order


def test_the_sampler_runs_from_the_kernel_that_delivers_a_blocked_sigtrap_late():
    from memsleuth import where
    assert not where.sampler_usable("6.1.0-18-amd64")      # Debian 12's stock kernel: perf record instead
    assert where.sampler_usable("6.2.0") and where.sampler_usable("6.18.44-fc")
    assert not where.sampler_usable("5.15.0") and not where.sampler_usable("garbage")
