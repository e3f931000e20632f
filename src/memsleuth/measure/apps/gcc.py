"""A compiler run: gcc -O2 on a generated C file of 160 functions (switches, loops, structs): the
compiler's own garbage-collected heap and obstacks, many small trees. The check: an object file
with every function's symbol."""
from __future__ import annotations

from pathlib import Path

from memsleuth.measure.apps.base import DONE, START, App

FUNCTIONS = 160


def source() -> str:
    out = ["struct s { int a, b; double c; char name[16]; };"]
    for i in range(FUNCTIONS):
        cases = "".join(f"case {k}: acc += v[{k % 7}] * {k + i}; break; " for k in range(12))
        out.append(f"int f{i}(const int *v, int n, struct s *p) {{ int acc = {i}; "
                   f"for (int j = 0; j < n; j++) {{ switch ((j + {i}) % 12) {{ {cases} }} "
                   f"if (acc > {1000 + i}) acc ^= p[j % 3].a + (int)p[j % 3].c; }} return acc; }}")
    return "\n".join(out) + "\n"


def prepare(folder: Path) -> None:
    (folder / "gen.c").write_text(source())


def script(folder: Path) -> str:
    return (f"{START}; gcc -O2 -c '{folder}/gen.c' -o '{folder}/gen.o'; "
            f"test $(nm '{folder}/gen.o' | grep -c ' T f') -eq {FUNCTIONS}; {DONE}")


APP = App("gcc", "a compiler run: gcc -O2 (its own collected heap and obstacks, many small trees)",
          ("gcc", "nm"), ("gcc", "binutils"), script, prepare)
