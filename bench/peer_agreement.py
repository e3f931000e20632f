"""Does memsleuth rank allocators as mimalloc-bench would? For the three workloads with a
mimalloc-bench counterpart in kind (cross-thread ~ xmalloc-test, server ~ larson, false-sharing ~
cache-scratch), one run: memsleuth compare's ranking (region main's throughput, interleaved rounds)
beside the ranking by timing the same binary the way mimalloc-bench does (the whole process under
GNU time, LD_PRELOAD=allocator, median of the runs). Prints both, Kendall's tau, and for every pair
the two order differently, why: the time outside region main (start, setup, harness, teardown,
exit), which the whole-process timing includes, or a difference within the noise.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile

from scipy import stats as st

from memsleuth.measure import allocators, workloads

RUNS = int(os.environ.get("BENCH_ROUNDS", "7"))
WORKLOADS = {"cross-thread": ["iterations=300000"], "server": ["iterations=300000"],
             "false-sharing": ["iterations=100000", "mode=passive"]}


def gnu_time(argv: list[str], preload: str | None) -> float:
    # MEMSLEUTH_NO_COUNTERS: the probe opens no perf events, so the binary runs as a plain benchmark
    # does (closing syscall tracepoints costs a process ~40 ms at exit otherwise: docs/architecture.md).
    env = {**os.environ, "MEMSLEUTH_NO_COUNTERS": "1", **({"LD_PRELOAD": preload} if preload else {})}
    env.pop("MEMSLEUTH_FD", None)
    with tempfile.NamedTemporaryFile(suffix=".txt") as out:
        subprocess.run(["/usr/bin/time", "-o", out.name, "-f", "%e %M", *argv], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return float(open(out.name).read().split()[0])


def main() -> None:
    if not os.path.exists("/usr/bin/time"):
        sys.exit("GNU time (/usr/bin/time, Debian package 'time') is needed: mimalloc-bench times with it")
    allocs = allocators.available()
    with tempfile.TemporaryDirectory() as tmp:
        for name, params in WORKLOADS.items():
            js = os.path.join(tmp, f"{name}.json")
            pargs = [a for kv in params for a in ("--param", kv)]
            subprocess.run([sys.executable, "-m", "memsleuth", "compare", "--workload", name, *pargs, "--reps",
                            str(RUNS), "--db", os.path.join(tmp, "p.db"), "--json", js, "--no-reference"],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            doc = json.load(open(js))
            ours, outside, ci = {}, {}, {}
            for c in doc["cells"]:
                a = c["allocator"]["name"]
                ours[a] = c["summary"]["median"]
                ci[a] = (c["summary"]["ci_low"], c["summary"]["ci_high"])
                runs = [s for s in c["samples"] if not s["warmup"] and s["status"] == "ok"]
                outside[a] = statistics.median(
                    s["wall_ns"] - next(r["wall_ns"] for r in s["regions"] if r["name"] == "main") for s in runs) / 1e6
            w = workloads.get(name)
            values = {k: v for k, v in w.defaults().items() if v is not None}
            for kv in params:
                k, v = kv.split("=")
                values[k] = w.param(k).parse(v, name)
            argv = w.argv(values)
            times: dict[str, list[float]] = {a.name: [] for a in allocs}
            for r in range(RUNS):   # interleaved too, so the comparison is fair to both methods
                for a in allocs[r % len(allocs):] + allocs[:r % len(allocs)]:
                    times[a.name].append(gnu_time(argv, a.preload))
            theirs = {a: statistics.median(v) for a, v in times.items()}
            rank_ours = sorted(ours, key=lambda a: -ours[a])
            rank_theirs = sorted(theirs, key=lambda a: theirs[a])
            tau = st.kendalltau([rank_ours.index(a) for a in ours], [rank_theirs.index(a) for a in ours]).statistic
            print(f"{name} ({', '.join(params)}), {RUNS} runs each:")
            print(f"  memsleuth (region main ops/s): {' > '.join(rank_ours)}")
            print(f"  GNU time (whole process s):    {' > '.join(rank_theirs)}")
            print(f"  Kendall tau {tau:+.2f}")
            for i, a in enumerate(rank_ours):
                for b in rank_ours[i + 1:]:
                    if rank_theirs.index(a) < rank_theirs.index(b):
                        continue
                    why = [f"time outside region main (start, setup, harness, teardown, exit) {a} {outside[a]:.0f} ms, "
                           f"{b} {outside[b]:.0f} ms"]
                    (alo, _), (blo, bhi) = ci[a], ci[b]
                    if alo is not None and blo is not None and alo <= bhi:
                        why.append("memsleuth's 95% CIs of the two overlap: its order of the two is not resolved")
                    if abs(theirs[a] - theirs[b]) <= 0.011:
                        why.append("GNU time's figures differ by its 10 ms resolution at most")
                    print(f"  disagree: {a} before {b} here, after it by GNU time ({theirs[a]:.2f} s vs "
                          f"{theirs[b]:.2f} s): " + "; ".join(why))
            if tau == 1.0:
                print("  the rankings agree")


if __name__ == "__main__":
    main()
