"""What the applications' inputs say, written without running them (measure/apps)."""
from __future__ import annotations

from memsleuth.measure.apps import redis


def test_redis_runs_io_threads_only_with_a_spare_core(tmp_path, monkeypatch):
    """redis-server's I/O threads spin while they wait: on 2 CPUs beside the load generator they took
    the cores from the work (the script 2.2x as long). Two where 4 CPUs or more may run it, else none."""
    for cpus, threads in ((1, 1), (2, 1), (3, 1), (4, 2), (16, 2)):
        monkeypatch.setattr(redis.os, "sched_getaffinity", lambda pid, n=cpus: set(range(n)))
        folder = tmp_path / str(cpus)
        folder.mkdir()
        redis.prepare(folder)
        assert f"\nio-threads {threads}\n" in (folder / "redis.conf").read_text(), cpus
