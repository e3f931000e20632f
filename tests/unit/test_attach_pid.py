"""What attach reads after its window is read only from the process it attached to (issue 43): a pid
names a process with its start time, and a pid that ended, or was reused by another process before
or during the read, is never read (its smaps and glibc's arenas would be the new owner's)."""
from __future__ import annotations

import os
import subprocess
import sys

from memsleuth.measure import attach
from memsleuth.records import proc


def test_the_same_process_is_read():
    me = os.getpid()
    assert attach.read_if_same(me, proc.start_time(me), lambda pid: f"read {pid}") == f"read {me}"


def test_a_process_that_ended_is_never_read():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    started = proc.start_time(child.pid)
    child.wait()
    calls = []
    assert attach.read_if_same(child.pid, started, calls.append) is None and calls == []
    # a pid whose start was never known names no process
    assert attach.read_if_same(os.getpid(), None, calls.append) is None and calls == []


def test_a_pid_reused_before_or_during_the_read_is_never_the_processs(monkeypatch):
    me = os.getpid()
    started = proc.start_time(me)
    # another process started under the pid before the read: not read at all
    monkeypatch.setattr(attach, "start_time", lambda pid: started + 500)
    calls = []
    assert attach.read_if_same(me, started, calls.append) is None and calls == []
    # the process ended and its pid was taken while it was read: what was read is the new owner's, dropped
    seen = iter([started, started + 500])
    monkeypatch.setattr(attach, "start_time", lambda pid: next(seen))
    assert attach.read_if_same(me, started, lambda pid: "the new owner's smaps") is None
