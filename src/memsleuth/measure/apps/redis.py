"""A key-value server under its own load generator: redis-server (two I/O threads where the machine
has 4 CPUs or more, else none: io_threads) on a Unix socket, driven by redis-benchmark (one event
loop, 50 clients, pipelines of 16) through SET, GET, LPUSH and LPOP; the figure is the mean of its
requests per second, the check that every test reported one and that the server answered a GET of
a key the benchmark wrote. Both run under the allocator measured, as mimalloc-bench's redis does.

Not `redis-benchmark --threads`: with client threads a test ends only at the benchmark's own 250 ms
progress timer, so each test's time (and the rate worked out from it) is rounded up to a multiple
of 250 ms (here 200,000 requests read 0.250 or 0.500 s, nothing between: 800,000 or 400,000
requests/s); a single event loop stops at the last reply (0.22-0.36 s).

Debian's redis programs link libjemalloc, ahead of libc: without a preloaded allocator their malloc
is jemalloc's, so the glibc cell measured jemalloc (the heap accounting's malloc_object for
redis-server and redis-benchmark: libjemalloc.so.2). The script appends libc to LD_PRELOAD: after
the allocator a cell preloads (which still comes first), before the libraries a program links, so
that glibc's cell is glibc's malloc. (mimalloc-bench builds its redis with MALLOC=libc instead.)"""
from __future__ import annotations

import os
from pathlib import Path

from memsleuth.measure.apps.base import FIGURE, App

REQUESTS = 200_000
# redis-server's own advice: I/O threads only with a spare core beside them (and the load generator
# runs on this machine too). On 2 CPUs, io-threads 2 left its I/O thread spinning against the main
# thread and redis-benchmark: 3 runs of the script took 2.70-2.94 s (user 3.2-3.4 s) against
# 1.25-1.31 s (user 0.9-1.0 s) with none, 0.80-0.86 million requests/s against 2.1 million, and the
# suite's redis row did not resolve at 6 rounds (each median's CI about +-12%).
IO_THREADS_CPUS = 4


def io_threads() -> int:
    """redis-server's io-threads for this machine: 2 where this process may run on IO_THREADS_CPUS
    CPUs or more, else 1 (the main thread does its own I/O)."""
    return 2 if len(os.sched_getaffinity(0)) >= IO_THREADS_CPUS else 1


def prepare(folder: Path) -> None:
    (folder / "redis.conf").write_text(f"port 0\nunixsocket {folder}/redis.sock\nunixsocketperm 700\nsave \"\"\n"
                                       f"appendonly no\nio-threads {io_threads()}\ndir {folder}\nlogfile \"\"\n"
                                       "loglevel warning\n")


def script(folder: Path) -> str:
    sock = f"'{folder}/redis.sock'"
    # LD_PRELOAD gets libc last: the cell's allocator first, then glibc's malloc before the linked jemalloc
    # The server is asked every 10 ms whether it is up (10 s at most): the wait is part of the wall time,
    # rounded up to the poll's step
    return (f"set -e; export LD_PRELOAD=\"${{LD_PRELOAD:+$LD_PRELOAD:}}libc.so.6\"; rm -f {sock}; "
            f"redis-server '{folder}/redis.conf' > '{folder}/server.log' 2>&1 & srv=$!; "
            f"trap 'kill $srv 2>/dev/null' EXIT; "
            f"i=0; until redis-cli -s {sock} ping > /dev/null 2>&1; do i=$((i+1)); "
            f"[ $i -lt 1000 ] || exit 1; sleep 0.01; done; "
            f"redis-benchmark -s {sock} -n {REQUESTS} -c 50 -P 16 -t set,get,lpush,lpop -q "
            f"> '{folder}/bench.out'; "
            f"test \"$(redis-cli -s {sock} exists key:__rand_int__)\" = 1; "
            f"redis-cli -s {sock} shutdown nosave > /dev/null 2>&1 || true; wait $srv || true; trap - EXIT; "
            f"tr '\\r' '\\n' < '{folder}/bench.out' | awk '/requests per second/ {{ for (i = 1; i <= NF; i++) "
            f"if ($(i+1) == \"requests\") {{ s += $i; n++ }} }} END {{ if (n != 4) exit 1; "
            f"printf \"{FIGURE}%.0f requests/s\\n\", s / n }}'")


APP = App("redis", "a key-value server and its load generator: many small values, 50 pipelined clients, "
          "I/O threads on 4 CPUs or more", ("redis-server", "redis-benchmark", "redis-cli"), ("redis-server", "redis-tools"),
          script, prepare, figure="requests/s")
