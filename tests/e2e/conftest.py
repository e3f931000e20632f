"""Shared helpers: real processes only. Fixtures are the native test programs built by `make test`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memsleuth.measure import native

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True, scope="session")
def own_symbols_cache(tmp_path_factory):
    """The tests' symbols cache (symbols.py, $XDG_CACHE_HOME/memsleuth) is their own, never the user's."""
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old
FIXTURES = Path(os.environ.get("MEMSLEUTH_TEST_FIXTURES", ROOT / "build" / "test")).resolve()


def fixture(name: str) -> str:
    path = FIXTURES / name
    if not path.exists():
        pytest.fail(f"test fixture {path} missing: run the tests with `make test`, which builds it")
    return str(path)


# Python that hands the next pid of this pid namespace to the process that had `pid` (as CRIU does):
# the next fork gets it. Root, in a namespace of its own (in_pid_namespace).
def hand_pid_back(pid: str) -> str:
    return f"open('/proc/sys/kernel/ns_last_pid', 'w').write(str({pid} - 1))\n"


def in_pid_namespace(script: str, out: Path) -> dict:
    """Runs `script` (sh) as the first process of a pid namespace with its own /proc, where a pid can be
    handed back (hand_pid_back), and returns the JSON document it wrote to `out`; skipped where root,
    unshare or pid namespaces are missing."""
    import shutil
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("a pid namespace and ns_last_pid need root and unshare")
    done = subprocess.run(["unshare", "-p", "-f", "--mount-proc", "sh", "-c", script], capture_output=True,
                          text=True, timeout=120)
    if not out.exists():
        pytest.skip(f"no pid namespace here: {done.stderr.strip()[:200]}")
    return json.loads(out.read_text())


def ms_run(*args: str, timeout: float = 120) -> dict:
    out = subprocess.run([str(native.ms_run()), *args], capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def default_stop_signals() -> None:
    """A Popen preexec_fn: SIGINT, SIGTERM and SIGHUP at their defaults in memsleuth, whatever the
    suite inherited (a suite started in the background by a non-interactive shell has SIGINT
    ignored, one under nohup SIGHUP, and Python and memsleuth rightly keep an ignored signal so)."""
    import signal
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def memsleuth(*args: str, timeout: float = 600, cwd: str | None = None, columns: str | None = "200") \
        -> subprocess.CompletedProcess:
    """memsleuth's output piped, COLUMNS wide (None: no COLUMNS, the piped default)."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = columns
    return subprocess.run([sys.executable, "-m", "memsleuth", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=env)


def probe_events() -> dict:
    return json.loads(subprocess.run([str(native.ms_run()), "--events"], capture_output=True, text=True).stdout)


EVENTS = probe_events()
HAVE_TRACEPOINTS = "madvise" in EVENTS.get("opened", [])
HAVE_PMU = "cycles" in EVENTS.get("opened", [])
NO_TRACEPOINTS_REASON = "syscall tracepoints unavailable here: " + str(EVENTS.get("unsupported", {}).get("madvise"))
NO_PMU_REASON = "no PMU on this machine (hardware counters do not open: " + str(
    EVENTS.get("unsupported", {}).get("cycles")) + ")"

needs_tracepoints = pytest.mark.skipif(not HAVE_TRACEPOINTS, reason=NO_TRACEPOINTS_REASON)
needs_pmu = pytest.mark.skipif(not HAVE_PMU, reason=NO_PMU_REASON)


def regions_of(doc: dict) -> list[dict]:
    from memsleuth.measure.launcher import normalise
    probe = normalise(dict(doc)).get("probe", [])
    return [p for p in probe if isinstance(p, dict) and p.get("type") == "region"]
