"""The independent reference for measured costs: `perf record -e cpu-clock -g` on the same
command, each sample classified here on its own terms (not by memsleuth's cpu_profile): a
`asm_exc_page_fault` frame is a page fault (a system call's too), else a `__x64_sys_NAME` frame that
system call (`kernel_clone`: clone), a sample with no kernel frame user mode, a sample in the
syscall entry's own code the calls' (shared out among those the chains name), the rest other kernel
work. Used by the e2e tests and bench/cost_vs_perf.py."""
from __future__ import annotations

import re
import subprocess
from collections import Counter
from pathlib import Path


def _recorded(data: Path, cmd, fields: str, chains: bool = True, env: dict | None = None) -> str:
    """`perf record -e cpu-clock -F 1000` (with call chains where `chains`) of the command into `data`,
    and `perf script -F fields` of it."""
    rec = subprocess.run(["perf", "record", "-q", "--no-buildid-cache", "-e", "cpu-clock", "-F", "1000",
                          *(["-g"] if chains else []), "-o", str(data), "--", *cmd],
                         capture_output=True, text=True, timeout=300, env=env)
    if rec.returncode != 0:
        raise RuntimeError(f"perf record failed: {rec.stderr.strip()[-300:]}")
    return subprocess.run(["perf", "script", "-i", str(data), "-F", fields], capture_output=True, text=True,
                          timeout=300).stdout


def perf_shares(data: Path, *cmd: str, under: tuple[str, ...] = ()) -> dict[str, float]:
    """Each class's share of perf's cpu-clock samples of the command (written to `data`); with
    `under`, also "faults-under": the page faults taken with a user frame whose name holds one of
    those strings (a fault's who: the loop that wrote the memory, by perf's own symbols)."""
    out = _recorded(data, cmd, "comm,ip,sym")
    counts: Counter = Counter()
    frames: list[tuple[str, str]] | None = None

    def done(fr):
        kernel = [sym for addr, sym in fr if addr.startswith("ffff")]
        calls = [m.group(1) for sym in kernel if (m := re.match(r"__x64_sys_(\w+)$", sym))]
        # a fault is a fault, also where a system call took it (read() copying into a new buffer);
        # a fork whose wrapper the kernel inlined is named by its own frame
        cls = ("page-faults" if "asm_exc_page_fault" in kernel else calls[-1] if calls else
               "clone" if "kernel_clone" in kernel else "user" if not kernel else
               "entry" if set(kernel) <= _ENTRY else "other")
        counts[cls] += 1
        if cls == "page-faults" and under and any(u in sym for addr, sym in fr if not addr.startswith("ffff")
                                                  for u in under):
            counts["faults-under"] += 1
        if cls == "page-faults":      # what the fault did, by perf's own frames (also counted under page-faults)
            names = set(kernel)
            # a private file mapping's first write: do_cow_fault, or (inlined into do_fault) the copy or
            # the page allocated for it called straight from do_fault
            inner = kernel[kernel.index("do_fault") - 1] if "do_fault" in kernel[1:] else ""
            counts["faults:" + ("private-copy" if "do_cow_fault" in names or inner.startswith("copy_") or
                                inner.startswith(("vma_alloc_folio", "folio_prealloc", "anon_vma_prepare",
                                                  "__anon_vma_prepare")) else
                                "shared-file-write" if any(n.endswith("_page_mkwrite") for n in names) or
                                "finish_mkwrite_fault" in names or
                                names >= {"do_wp_page", "fault_dirty_shared_page"} else
                                "copy-on-write" if names & {"do_wp_page", "wp_page_copy"} else
                                "file-backed" if any(n.startswith("filemap_") or n in ("do_read_fault", "__do_fault",
                                                                                        "do_fault") for n in names) else
                                "zero-fill" if "do_anonymous_page" in names else "other")] += 1

    for line in out.splitlines() + [""]:
        if not line.strip():
            if frames is not None:
                done(frames)
            frames = None
        elif not line[0].isspace():
            frames = []
        elif frames is not None:
            parts = line.split()
            frames.append((parts[0], parts[1] if len(parts) > 1 else "?"))
    n = sum(v for k, v in counts.items() if not k.startswith("faults"))
    if n <= 200:
        raise RuntimeError(f"perf took only {n} samples")
    # a sample in the syscall entry's own code is the time of the calls the program made: shared out
    # among the calls perf's chains name, in their proportions
    entry = counts.pop("entry", 0)
    calls = {k: v for k, v in counts.items() if k not in ("page-faults", "user", "other", "faults-under")
             and not k.startswith("faults:")}
    named = sum(calls.values())
    for k, v in calls.items():
        counts[k] += entry * v / named
    if not named and entry:
        counts["other"] += entry
    return {k: v / n for k, v in counts.items()}


# The syscall entry's own frames: a sample with no other kernel frame names no call.
_ENTRY = {"do_syscall_64", "entry_SYSCALL_64", "entry_SYSCALL_64_after_hwframe", "x64_sys_call"}


def fault_kind_share(ref: dict[str, float], kind: str) -> float:
    """A fault kind's share of the CPU time as perf sees it: its share of the fault samples whose
    chain shows what they did, times all the faults' share (a sample taken in the fault's entry code
    shows nothing of what it did: perf's and memsleuth's alike)."""
    shown = sum(v for k, v in ref.items() if k.startswith("faults:") and k != "faults:other")
    return ref["page-faults"] * ref.get(f"faults:{kind}", 0.0) / shown if shown else 0.0


def perf_user_share(data: Path, entries: tuple[str, ...], *cmd: str, env: dict | None = None) -> float:
    """The share of perf's cpu-clock samples of the command taken in user mode with one of `entries`
    (functions, by perf's own names) in the sample's call chain: a runtime collector's entry points,
    say (perf's frame-pointer chains, its own symbols)."""
    out = _recorded(data, cmd, "ip,sym", env=env)
    n = hit = 0
    for block in out.split("\n\n"):
        frames = [line.split(None, 1) for line in block.splitlines() if line.strip()]
        if not frames:
            continue
        n += 1
        if any(f[0].startswith("ffff") for f in frames):
            continue                      # taken in the kernel
        names = {f[1].strip().split("+0x")[0] for f in frames if len(f) > 1}
        hit += bool(names & set(entries))
    if n <= 200:
        raise RuntimeError(f"perf took only {n} samples")
    return hit / n


def perf_innermost_share(data: Path, pattern: str, *cmd: str) -> float:
    """The share of perf's cpu-clock samples of the command whose sampled function (perf's own
    symbol, without its version or suffix: `cfree@GLIBC_2.2.5`, `unlink_chunk.constprop.0`) matches
    `pattern`, in user mode."""
    out = _recorded(data, cmd, "ip,sym", chains=False)
    n = hit = 0
    for line in out.splitlines():
        parts = line.split(None, 1)
        if not parts:
            continue
        n += 1
        name = re.split(r"[@.]", parts[1].strip(), maxsplit=1)[0] if len(parts) > 1 else ""
        hit += not parts[0].startswith("ffff") and re.match(pattern, name) is not None
    if n <= 200:
        raise RuntimeError(f"perf took only {n} samples")
    return hit / n
