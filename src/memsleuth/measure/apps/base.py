"""What a real application declares for `compare --suite apps`: the programs it needs and the
Debian packages that hold them, the inputs it is given (made by memsleuth, the same every time),
its command, and the one figure it reports. Every command is a small shell script that runs the
application, checks its result (an output compared with the input, a count the data fixes, the
server's own replies) and only then prints `memsleuth-app: FIGURE UNIT`: a run whose check fails
prints no figure and is an `error`, never a number (measure/launcher.read_metric)."""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from memsleuth.measure.plan import MetricSpec

# What each application's script prints once its check passed, and the metric that reads it.
FIGURE = "memsleuth-app: "


def figure_metric(name: str, higher_is_better: bool) -> MetricSpec:
    return MetricSpec(name, FIGURE.strip() + r" ([0-9]+(?:\.[0-9]+)?)", higher_is_better)


# Shell fragments: START marks the start; DONE prints the seconds since then as the figure (only
# reached when every check before it passed: the scripts run under `set -e`).
START = "set -e; t0=$(date +%s%N)"
DONE = ("t1=$(date +%s%N); awk -v a=\"$t0\" -v b=\"$t1\" "
        "'BEGIN { printf \"" + FIGURE + "%.3f seconds\\n\", (b - a) / 1e9 }'")


@dataclass(frozen=True)
class App:
    name: str
    exercises: str                      # what it stresses in an allocator, in a few words
    programs: tuple[str, ...]           # executables it needs on PATH
    packages: tuple[str, ...]           # the Debian packages that hold them
    script: Callable[[Path], str]       # the shell script (its inputs are in the folder given)
    prepare: Callable[[Path], None]     # writes its inputs into that folder
    figure: str = "seconds"             # what it reports: "seconds" (lower is better) or "requests/s"

    @property
    def metric(self) -> MetricSpec:
        return figure_metric(self.figure, self.figure != "seconds")

    def missing(self) -> list[str]:
        """The programs it needs that are not on PATH."""
        return [p for p in self.programs if shutil.which(p) is None]

    def command(self, folder: Path) -> list[str]:
        return ["sh", "-c", self.script(folder)]
