"""Where the native binaries are: installed beside the package, or a build tree for development."""
from __future__ import annotations

import os
from pathlib import Path

from memsleuth.errors import UsageError


def native_dir() -> Path:
    """The folder holding ms-run, libmscheck.so and the workload programs.

    MEMSLEUTH_NATIVE_DIR points at a CMake build tree (tests and development); otherwise the
    binaries are the ones `pip install` built into the package.
    """
    override = os.environ.get("MEMSLEUTH_NATIVE_DIR")
    return Path(override) if override else Path(__file__).resolve().parent.parent / "_native"


def native_path(name: str) -> Path:
    path = native_dir() / name
    if not path.exists():
        raise UsageError(
            f"native component {name!r} not found in {path.parent} "
            "(reinstall memsleuth with `pip install .`, or run `make`)"
        )
    return path


def ms_run() -> Path:
    return native_path("ms-run")


# How long ms-run's preload check may take: it stops the command at its first instruction.
CHECK_TIMEOUT_S = 60.0


def run_preload_check(argv: list[str]) -> dict:
    """Runs `ms-run --preload-check ...` and returns its JSON document; a check that could not run
    is a document saying so (preload_ok None), never an exception."""
    import json
    import subprocess
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=CHECK_TIMEOUT_S)
        return json.loads(proc.stdout.decode("utf-8", errors="replace"))
    except (OSError, subprocess.SubprocessError, json.JSONDecodeError) as e:
        return {"checked": False, "preload_ok": None, "why": f"the preload check could not run: {e}"}
