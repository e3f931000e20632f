"""Real applications for `compare --suite apps`, one module each (base.py says what one declares):
what mimalloc-bench's real programs cover, from Debian packages the project's set-up installs."""
from __future__ import annotations

from memsleuth.measure.apps.base import App
from memsleuth.measure.apps.gcc import APP as GCC
from memsleuth.measure.apps.lua import APP as LUA
from memsleuth.measure.apps.python import APP as PYTHON
from memsleuth.measure.apps.redis import APP as REDIS
from memsleuth.measure.apps.sqlite import APP as SQLITE
from memsleuth.measure.apps.xz import APP as XZ
from memsleuth.measure.apps.zstd import APP as ZSTD

# In this order; each run with the suite's rounds.
APPS: tuple[App, ...] = (REDIS, SQLITE, PYTHON, LUA, GCC, XZ, ZSTD)
# The Debian packages that hold them all (the project's set-up installs them: Makefile).
PACKAGES = tuple(dict.fromkeys(p for a in APPS for p in a.packages))

__all__ = ["App", "APPS", "PACKAGES"]
