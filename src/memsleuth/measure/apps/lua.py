"""A second interpreter, with its own garbage collector over realloc: Lua 5.4 building tables of
strings and closures, concatenating and collecting (mimalloc-bench runs Lua too). The script
checks its totals."""
from __future__ import annotations

from pathlib import Path

from memsleuth.measure.apps.base import DONE, START, App

SCRIPT = """
local total = 0
for round = 1, 12 do
  local t = {}
  for i = 1, 60000 do
    t[i] = { name = "item" .. i, value = i % 97, f = function(x) return x + i end }
  end
  local parts = {}
  for i = 1, #t, 7 do parts[#parts + 1] = t[i].name .. ":" .. t[i].f(t[i].value) end
  local s = table.concat(parts, ",")
  total = total + #t + #parts
  assert(#s > 0)
end
assert(total == 12 * (60000 + 8572))
print("checked")
"""


def prepare(folder: Path) -> None:
    (folder / "job.lua").write_text(SCRIPT)


def script(folder: Path) -> str:
    return f"{START}; lua5.4 '{folder}/job.lua' | grep -qx checked; {DONE}"


APP = App("lua", "an interpreter with its own garbage collector over realloc: tables, strings and closures",
          ("lua5.4",), ("lua5.4",), script, prepare)
