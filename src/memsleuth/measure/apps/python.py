"""An interpreter's allocation-heavy script: CPython (Debian's /usr/bin/python3, its own small-object
allocator over malloc) building dicts of tuples and strings, sorting them, and a JSON round trip.
The script checks its own results (the round trip returns what it was given)."""
from __future__ import annotations

from pathlib import Path

from memsleuth.measure.apps.base import DONE, START, App

SCRIPT = """
import json
rows = [{"id": i, "name": "user%07d" % ((i * 7919) % 200000), "tags": ("a", str(i % 97)), "score": i % 1013}
        for i in range(200000)]
rows.sort(key=lambda r: (r["score"], r["name"]))
text = json.dumps(rows)
back = json.loads(text)
assert len(back) == len(rows) and back[0]["name"] == rows[0]["name"] and back[-1]["id"] == rows[-1]["id"]
index = {}
for r in back:
    index.setdefault(r["score"], []).append(r["id"])
assert len(index) == 1013 and sum(len(v) for v in index.values()) == 200000
print("checked")
"""


def prepare(folder: Path) -> None:
    (folder / "job.py").write_text(SCRIPT)


def script(folder: Path) -> str:
    return f"{START}; python3 -I '{folder}/job.py' | grep -qx checked; {DONE}"


APP = App("python", "an interpreter's allocation-heavy script: dicts, tuples and strings built, sorted and "
          "round-tripped through JSON", ("python3",), ("python3-minimal",), script, prepare)
