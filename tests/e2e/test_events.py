"""The one list of event names (memsleuth.events) is the list ms-run defines."""
from __future__ import annotations

from memsleuth import events
from conftest import EVENTS


def test_python_event_lists_match_ms_run():
    by_kind: dict[str, list[str]] = {}
    for e in EVENTS["events"]:
        by_kind.setdefault(e["kind"], []).append(e["name"])
    assert tuple(by_kind["software"]) == events.SOFTWARE
    assert tuple(by_kind["hardware"]) == events.HARDWARE
    assert tuple(by_kind["syscall"]) == events.SYSCALLS
    assert set(events.SYSCALL_COLUMNS) <= set(events.SYSCALLS)
    assert set(events.HARDWARE_SHORT) == set(events.HARDWARE)
    assert set(events.FAULT_EVENTS) <= set(events.SOFTWARE)


def test_every_event_that_did_not_open_says_why():
    names = {e["name"] for e in EVENTS["events"]}
    assert set(EVENTS["opened"]) | set(EVENTS["unsupported"]) == names
