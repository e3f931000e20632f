"""The tree is the design's flow (docs/architecture.md): measure/ and records/ never import
analysis/ or report/, records/ never imports measure/, analysis/ never imports measure/ or report/;
no import cycles between modules; few modules beside the tiers; no generated file tracked."""
from __future__ import annotations

import ast
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PKG = ROOT / "src" / "memsleuth"
# Which tiers each tier may import (the shared base at the top of the package: any tier).
FORBIDDEN = {"records": ("measure", "analysis", "report", "cases", "commands"),
             "measure": ("analysis", "report", "cases", "commands"),
             "analysis": ("measure", "report", "cases", "commands"),
             "report": ("measure", "commands")}
MAX_TOP_MODULES = 10


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = list(p.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = p
    return out


def _imports(name: str, path: pathlib.Path, modules) -> set[str]:
    """The package's own modules that `name` imports, anywhere in it (lazy imports too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "memsleuth":
            for a in node.names:
                full = f"{node.module}.{a.name}"
                found.add(full if full in modules else node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "memsleuth"}
    return {m for m in found if m in modules and m != name}


def _tier(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (PKG / parts[1]).is_dir()) else None


def test_no_tier_imports_one_it_must_not():
    modules = _modules()
    wrong = []
    for name, path in modules.items():
        tier = _tier(name)
        for dep in _imports(name, path, modules):
            if tier in FORBIDDEN and _tier(dep) in FORBIDDEN[tier]:
                wrong.append(f"{name} imports {dep}")
    assert wrong == []


def test_no_import_cycles():
    modules = _modules()
    graph = {n: _imports(n, p, modules) for n, p in modules.items()}
    graph = {n: {d for d in deps if not n.startswith(d + ".")} for n, deps in graph.items()}   # a package's face
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(n: str, path: list[str]) -> bool:
        state[n] = 1
        for d in sorted(graph.get(n, ())):
            if state.get(d) == 1:
                cycle.extend(path[path.index(d):] + [n, d] if d in path else [n, d])
                return True
            if d not in state and visit(d, path + [n]):
                return True
        state[n] = 2
        return False

    for n in sorted(graph):
        if n not in state and visit(n, []):
            break
    assert cycle == []


def test_few_modules_beside_the_tiers():
    top = sorted(p.name for p in PKG.glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, top


# What runs write and must never be committed: V8's logs, perf maps, stores, wheels.
GENERATED = re.compile(r"(^|/)(isolate-0x[0-9a-f]+-.*\.log|perf-\d+\.map|memsleuth\.db(-wal|-shm)?|[^/]+\.whl)$")


def test_no_generated_file_is_tracked():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing to say about tracked files")
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert [f for f in tracked.splitlines() if GENERATED.search(f) and not f.startswith("tests/data/")] == []


def test_every_command_module_is_in_the_table_under_its_own_name():
    """cli reads the commands' names and help from one table, importing a module only when its command
    runs: the table and the modules name the same commands."""
    from memsleuth.commands import COMMANDS, module
    files = sorted(p.stem for p in (PKG / "commands").glob("*.py") if p.stem not in ("__init__", "options"))
    assert sorted(name for name, _ in COMMANDS) == files
    for name, _ in COMMANDS:
        m = module(name)
        assert m.NAME == name and callable(m.add_arguments) and callable(m.run)


def test_top_level_help_imports_no_command_module():
    code = ("import sys; from memsleuth import cli\n"
            "try:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('memsleuth.') and m.count('.') > 1))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(PKG.parent)}).stdout.splitlines()[-1]
    assert out == "[]"


def test_a_temporary_folder_a_killed_memsleuth_left_is_removed_by_the_next(tmp_path, monkeypatch):
    import tempfile
    from memsleuth.measure import workdirs
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = next(p for p in range(4_000_000, 4_100_000) if not os.path.exists(f"/proc/{p}"))
    left = tmp_path / f"memsleuth-attach-{dead}-x1"
    left.mkdir()
    (left / "perf.data").write_bytes(b"0" * 1024)
    mine = tmp_path / f"memsleuth-run-{os.getpid()}-x2"          # this process's own: in use
    mine.mkdir()
    running = tmp_path / f"memsleuth-where-{os.getppid()}-x3"     # a process that runs
    running.mkdir()
    other = tmp_path / "memsleuth-notes"                           # not one of ours
    other.mkdir()
    assert workdirs.sweep() == [str(left)]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([mine.name, running.name, other.name])


def test_what_the_session_loads_beside_an_explaining_run_names_modules_that_exist():
    """session.REPORT_MODULES is imported in a thread that swallows failures (the report imports
    them again where used): a renamed module would silently stop being loaded early."""
    from memsleuth import session
    mods = _modules()
    assert session.REPORT_MODULES and all(m in mods for m in session.REPORT_MODULES), \
        [m for m in session.REPORT_MODULES if m not in mods]
