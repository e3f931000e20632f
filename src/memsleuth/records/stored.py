"""The records a stored run is read back as: runs -> cells -> samples, with the rounds that are
not measured (warm-up, the explaining run) and the reference cell's position. The store writes
and reads them; analysis, cases and reports read them and never import the store.
"""
from __future__ import annotations

from dataclasses import dataclass

from memsleuth.records.evidence import Sample
from memsleuth.records.model import AllocatorInfo, MachineInfo, RunSpec, cell_label, contender
from memsleuth.records.sites import CallSites

WARMUP_ROUND = -1
# One more run per cell, after the measured ones, that explains them (syscall arguments, heap
# accounting, call sites): what it records costs the program, so no measured run carries it.
EXPLAIN_ROUND = -2
# The position of the reference cell (plan.reference_cell): loaded as StoredRun.reference, never
# among the compared cells.
REFERENCE_POSITION = -1


@dataclass
class StoredCell:
    id: int
    position: int
    allocator: AllocatorInfo
    params: dict
    env: dict
    command: list
    samples: list[tuple[int, bool, Sample]]  # (round, warmup, sample)
    where: CallSites | None = None            # call sites (sites.py), when recorded

    @property
    def label(self) -> str:
        return cell_label(self.allocator.name, self.params)

    @property
    def contender(self) -> str:
        return contender(self.allocator.name, self.params)

    def measured(self) -> list[tuple[int, Sample]]:
        return [(r, s) for r, w, s in self.samples if not w]

    @property
    def explain_samples(self) -> list[Sample]:
        """The explaining run(s): not measured, they carry the syscalls' arguments."""
        return [s for r, w, s in self.samples if r == EXPLAIN_ROUND and s.ok]


@dataclass
class StoredRun:
    id: int
    created_at: str
    finished_at: str | None
    status: str
    kind: str
    name: str
    argv: list
    spec: RunSpec
    machine: MachineInfo
    version: str
    cells: list[StoredCell]
    reference: StoredCell | None = None       # the reference cell (plan.reference_cell), not compared
    uuid: str = ""                             # identity across stores (merge)


@dataclass
class RunSummary:
    """One line of `memsleuth history`."""
    id: int
    created_at: str
    status: str
    kind: str
    name: str
    argv: list
    machine: MachineInfo
    cells: int
    samples: int
