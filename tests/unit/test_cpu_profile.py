"""The sampled CPU time by kernel path (cpu_profile.py) on stored documents: classification of
kernel chains, the intervals of shares, and the costs findings read from them."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from types import SimpleNamespace

from memsleuth.records import cpu_profile
from memsleuth.records.cpu_profile import EXIT, FAULT, OTHER, USER, classify

DATA = Path(__file__).resolve().parents[1] / "data"

SYSCALL = ["do_syscall_64", "entry_SYSCALL_64_after_hwframe"]


@pytest.mark.parametrize("frames,expected", [
    ([], (USER, None)),
    (["clear_page_erms", "do_anonymous_page", "__handle_mm_fault", "handle_mm_fault", "exc_page_fault",
      "asm_exc_page_fault"], (FAULT, "small-page zero-fill")),
    (["clear_page_erms", "folio_zero_user", "do_huge_pmd_anonymous_page", "handle_mm_fault", "exc_page_fault",
      "asm_exc_page_fault"], (FAULT, "huge-page zero-fill")),
    (["copy_mc_enhanced_fast_string", "wp_page_copy", "do_wp_page", "handle_mm_fault", "exc_page_fault",
      "asm_exc_page_fault"], (FAULT, "copy-on-write")),
    # the path a file's pages and shared memory's share: told apart in read() (below)
    (["filemap_map_pages", "do_read_fault", "handle_mm_fault", "exc_page_fault", "asm_exc_page_fault"],
     (FAULT, cpu_profile.FILE_OR_SHARED)),
    (["filemap_fault", "__do_fault", "do_read_fault", "handle_mm_fault", "exc_page_fault", "asm_exc_page_fault"],
     (FAULT, "file-backed")),
    (["clear_page_erms", "shmem_alloc_and_add_folio", "shmem_get_folio_gfp", "shmem_fault", "__do_fault",
      "do_shared_fault", "handle_mm_fault", "exc_page_fault", "asm_exc_page_fault"], (FAULT, "shared memory")),
    (["exc_page_fault", "asm_exc_page_fault"], (FAULT, cpu_profile.UNRESOLVED_FAULT)),
    # a fault taken inside a system call (MADV_POPULATE, read's copy) is that call's time
    (["clear_page_erms", "do_anonymous_page", "handle_mm_fault", "faultin_page", "__get_user_pages",
      "madvise_populate", "do_madvise", "__x64_sys_madvise", "x64_sys_call", *SYSCALL], ("madvise", None)),
    # a fault the CPU raised inside a system call (read() copying into pages never written) is a fault
    (["clear_page_erms", "do_anonymous_page", "__handle_mm_fault", "handle_mm_fault", "do_user_addr_fault",
      "exc_page_fault", "asm_exc_page_fault", "rep_movs_alternative", "_copy_to_iter", "filemap_read", "vfs_read",
      "ksys_read", *SYSCALL], (FAULT, "small-page zero-fill")),
    (["clear_page_erms", "do_anonymous_page", "handle_mm_fault", "exc_page_fault", "asm_exc_page_fault",
      "_copy_to_user", "__x64_sys_read", "x64_sys_call", *SYSCALL], (FAULT, "small-page zero-fill")),
    # fork copying the parent's page tables is the clone call's
    (["copy_pte_range", "copy_page_range", "dup_mmap", "copy_process", "kernel_clone", "__x64_sys_clone",
      "x64_sys_call", *SYSCALL], ("clone", None)),
    (["zap_pte_range", "unmap_page_range", "__vm_munmap", "__x64_sys_munmap", "x64_sys_call", *SYSCALL],
     ("munmap", None)),
    (["__arm64_sys_brk", "invoke_syscall", "el0_svc_common"], ("brk", None)),
    (["free_pages_and_swap_cache", "exit_mmap", "__mmput", "do_exit", "do_group_exit", "__x64_sys_exit_group",
      "x64_sys_call", *SYSCALL], (EXIT, None)),
    (["release_pages", "exit_mmap", "mmput", "do_exit", "do_group_exit", "get_signal",
      "arch_do_signal_or_restart", "irqentry_exit_to_user_mode"], (EXIT, None)),       # killed by a signal
    (["load_elf_binary", "bprm_execve", "do_execveat_common", "__x64_sys_execve", *SYSCALL],
     (cpu_profile.EXEC, None)),
    (["syscall_exit_to_user_mode", *SYSCALL], (cpu_profile.UNNAMED_SYSCALL, None)),
    # 6.18: the dispatcher inlined mmap's wrappers; its body, directly under the entry, names it
    (["arch_get_unmapped_area_topdown", "__get_unmapped_area", "do_mmap", "vm_mmap_pgoff", *SYSCALL],
     ("mmap", None)),
    (["perf_iterate_ctx", "perf_event_mmap", "__mmap_region", "do_mmap", "vm_mmap_pgoff", *SYSCALL], ("mmap", None)),
    # and write's and read's (a pipe carrying a pool's payloads, 6.18: ksys_write <- do_syscall_64)
    (["_copy_from_iter", "copy_page_from_iter", "anon_pipe_write", "vfs_write", "ksys_write", *SYSCALL],
     ("write", None)),
    (["_copy_to_iter", "anon_pipe_read", "vfs_read", "ksys_read", *SYSCALL], ("read", None)),
    (["tcp_sendmsg", "sock_sendmsg", "__sys_sendto", *SYSCALL], ("sendto", None)),
    (["do_poll", "do_sys_poll", *SYSCALL], ("poll", None)),
    # a body below another frame is not the call's own (vfs_write called by a kernel's own path)
    (["vfs_write", "ksys_write", "some_helper", *SYSCALL], (cpu_profile.UNNAMED_SYSCALL, None)),
    # the tracepoint at the entry, before the call is dispatched: which call it is, the chain does not say
    (["perf_tp_event", "perf_syscall_enter", "syscall_trace_enter", *SYSCALL], (cpu_profile.TRACING, None)),
    (["__do_softirq", "irq_exit_rcu", "sysvec_apic_timer_interrupt", "asm_sysvec_apic_timer_interrupt"],
     (OTHER, "__do_softirq")),
])
def test_a_sample_is_classified_by_how_the_kernel_was_entered(frames, expected):
    assert classify(frames) == expected


def test_wilson_intervals_hold_the_share_and_narrow_with_samples():
    lo, hi = cpu_profile.wilson(50, 100)
    assert lo < 0.5 < hi and hi - lo == pytest.approx(0.19, abs=0.01)
    lo2, hi2 = cpu_profile.wilson(2000, 4000)
    assert hi2 - lo2 < 0.035
    assert cpu_profile.wilson(0, 100)[0] == pytest.approx(0.0, abs=1e-12)
    assert cpu_profile.wilson(100, 100)[1] == pytest.approx(1.0, abs=1e-12)


def stored() -> dict:
    return json.loads((DATA / "cpu-profile-fault-loop.json").read_text())


def test_a_stored_profile_reads_as_perf_record_saw_the_same_program():
    """ms-run's samples of a fault loop, classified: within 0.75-1.33x of the shares perf record's
    cpu-clock samples gave the same program (the note in the data file)."""
    p = cpu_profile.read(stored()["cpu_profile"])
    assert p is not None and p.usable and p.samples > 1000
    for cls, perf_share in ((FAULT, 0.808), ("munmap", 0.035), ("madvise", 0.031)):
        assert 0.75 <= p.share(cls) / perf_share <= 1.33, (cls, p.share(cls))
    assert p.fault_kinds.get("small-page zero-fill", 0) > 0
    assert p.executables[0][0] == "faulty" and p.executables[0][2] == 1


def test_findings_cost_by_the_samples_and_say_so():
    from memsleuth.records.evidence import Sample
    from memsleuth.analysis import cost
    from memsleuth.analysis.view import CellView
    d = stored()
    doc = {"status": "ok", "wall_ns": 2_200_000_000, "user_ns": d["user_ns"], "sys_ns": d["sys_ns"],
           "minflt": 1_638_000, "maxrss_kb": 17_000, "syscalls": {"mmap": 200, "munmap": 200, "madvise": 200}}
    measured = Sample.from_msrun(doc)
    explain = Sample.from_msrun({**doc, "cpu_profile": d["cpu_profile"]})
    v = CellView("faulty", "glibc", [measured], explain=[explain])
    split = v.kernel_split(v.process)
    cpu = d["user_ns"] + d["sys_ns"]
    assert split.profile is not None
    faults, kernel = v.profile.counts[FAULT], v.profile.kernel_samples
    # the same counts and wall time in both runs: the measured kernel time in the samples' proportions
    assert split.cost("page-faults") == pytest.approx(d["sys_ns"] * faults / kernel)
    assert split.cost("page-faults") / cpu == pytest.approx(v.profile.share(FAULT), rel=0.1)   # vs perf: the note
    text = split.describe(split.cost("page-faults"))
    assert "sampled, 95% CI" in text
    lo, hi = split.interval(split.cost("page-faults"))
    assert lo < split.share(split.cost("page-faults")) < hi and hi - lo < 0.1
    # an explaining run whose instrumentation doubled the faults: half their sampled time is the
    # measured runs' count's
    doubled = Sample.from_msrun({**doc, "minflt": 2 * doc["minflt"], "cpu_profile": d["cpu_profile"]})
    v2 = CellView("faulty", "glibc", [measured], explain=[doubled])
    assert v2.kernel_split(v2.process).cost("page-faults") == pytest.approx(
        d["sys_ns"] * (faults / 2) / (kernel - faults / 2))
    # a measured run whose faults took twice as long (a VM's page backing): its own kernel time counts
    slow = Sample.from_msrun({**doc, "sys_ns": 2 * d["sys_ns"]})
    v3 = CellView("faulty", "glibc", [slow], explain=[explain])
    assert v3.kernel_split(v3.process).cost("page-faults") == pytest.approx(2 * split.cost("page-faults"))
    # without the explaining run's samples the same evidence is estimated, and says so
    estimated = CellView("faulty", "glibc", [measured]).kernel_split(v.process)
    assert estimated.profile is None and "estimated from counts" in estimated.describe(estimated.cost("page-faults"))
    # too few samples: no cost is read from them
    few = {**d["cpu_profile"], "samples": 50}
    assert not cpu_profile.read(few).usable
    assert cost.sampled(v.process, v.profile, v.explained_counts).sys_ns <= cpu


def test_a_profile_that_is_not_what_ms_run_writes_is_ignored():
    assert cpu_profile.read(None) is None
    assert cpu_profile.read({"stacks": [["x", "y"]]}) is None
    p = cpu_profile.read({"samples": 10, "frames": ["0xffffffff81000c60"], "stacks": [[0, 10, 0, [0]]],
                          "executables": [["a", 10, 1]]})
    assert p is not None and not p.usable and "unnamed" in p.why


def _tree_profile(mapped_by_prog: int) -> dict:
    """A profile as ms-run writes it for `sh -c 'exec env -i prog'` under a preloaded allocator: the
    shell mapped it, prog (2 processes exec'd) mapped it `mapped_by_prog` times."""
    return {"period_ns": 500000, "samples": 400, "kernel_samples": 200, "frames": ["asm_exc_page_fault"],
            "preload": ["/usr/lib/x86_64-linux-gnu/libmimalloc.so.2.0"],
            "executables": [["sh", 10, 1, 1, [1]], ["prog", 390, 2, 2, [mapped_by_prog]]],
            "stacks": [[1, 200, 0, [0], 1], [1, 190, 0, [], 0], [0, 10, 0, [], 0]]}


def test_a_preload_that_missed_the_measured_program_is_said_and_no_allocator_is_offered():
    from memsleuth.records.evidence import Sample
    from memsleuth.analysis.findings import preload_missed
    from memsleuth.analysis.view import CellView
    doc = {"status": "ok", "wall_ns": 10**9, "user_ns": 5 * 10**8, "sys_ns": 5 * 10**8, "minflt": 10**5,
           "preload": "/lib/x86_64-linux-gnu/libmimalloc.so.2"}
    missed = CellView("m", "mimalloc", [Sample.from_msrun(doc)],
                      explain=[Sample.from_msrun({**doc, "cpu_profile": _tree_profile(0)})])
    f = preload_missed.check(missed)
    assert f and f[0].confidence == "high" and f[0].cost_share == pytest.approx(390 / 400)
    assert "prog: 2 of 2 processes" in f[0].evidence[0]
    assert missed.preload_reaches_program is False
    half = CellView("m", "mimalloc", [Sample.from_msrun(doc)],
                    explain=[Sample.from_msrun({**doc, "cpu_profile": _tree_profile(1)})])
    g = preload_missed.check(half)          # one of the two processes ran without it: half its CPU time
    assert g and g[0].confidence == "medium" and g[0].cost_share == pytest.approx(195 / 400)
    reached = CellView("m", "mimalloc", [Sample.from_msrun(doc)],
                       explain=[Sample.from_msrun({**doc, "cpu_profile": _tree_profile(2)})])
    assert preload_missed.check(reached) == [] and reached.preload_reaches_program is True
    # glibc (nothing preloaded): nothing to say
    plain = CellView("g", "glibc", [Sample.from_msrun({**doc, "preload": None})],
                     explain=[Sample.from_msrun({**doc, "preload": None, "cpu_profile": _tree_profile(0)})])
    assert preload_missed.check(plain) == []


FAULT_CHAINS = {"copy-on-write": ["copy_mc_enhanced_fast_string", "wp_page_copy", "do_wp_page", "handle_mm_fault",
                                  "exc_page_fault", "asm_exc_page_fault"],
                "small-page zero-fill": ["clear_page_erms", "do_anonymous_page", "handle_mm_fault", "exc_page_fault",
                                         "asm_exc_page_fault"],
                "file-backed": ["filemap_map_pages", "do_read_fault", "handle_mm_fault", "exc_page_fault",
                                "asm_exc_page_fault"],
                # a write to a MAP_PRIVATE file mapping on 6.18: do_cow_fault inlined, its copy under do_fault
                "private file copy": ["copy_mc_enhanced_fast_string", "do_fault", "__handle_mm_fault",
                                      "handle_mm_fault", "exc_page_fault", "asm_exc_page_fault"],
                "shared file write": ["block_commit_write", "block_page_mkwrite", "ext4_page_mkwrite",
                                      "do_page_mkwrite", "do_wp_page", "__handle_mm_fault", "handle_mm_fault",
                                      "exc_page_fault", "asm_exc_page_fault"],
                "huge-page zero-fill": ["clear_page_erms", "folio_zero_user", "do_huge_pmd_anonymous_page",
                                        "handle_mm_fault", "exc_page_fault", "asm_exc_page_fault"],
                "NUMA hinting": ["migrate_misplaced_folio", "do_numa_page", "handle_pte_fault", "__handle_mm_fault",
                                 "handle_mm_fault", "exc_page_fault", "asm_exc_page_fault"],
                "memory-limit reclaim": ["shrink_folio_list", "shrink_node", "do_try_to_free_pages",
                                         "try_to_free_mem_cgroup_pages", "try_charge_memcg", "filemap_fault",
                                         "handle_mm_fault", "exc_page_fault", "asm_exc_page_fault"],
                "direct reclaim or compaction": ["shrink_folio_list", "shrink_node", "do_try_to_free_pages",
                                                 "try_to_free_pages", "__alloc_pages_direct_reclaim",
                                                 "__alloc_pages_slowpath", "alloc_anon_folio", "do_anonymous_page",
                                                 "handle_mm_fault", "exc_page_fault", "asm_exc_page_fault"],
                "mmap_lock wait": ["osq_lock", "rwsem_optimistic_spin", "rwsem_down_read_slowpath",
                                   "lock_mm_and_find_vma", "do_user_addr_fault", "exc_page_fault",
                                   "asm_exc_page_fault"],
                "hugetlbfs": ["clear_huge_page", "hugetlb_no_page", "hugetlb_fault", "handle_mm_fault",
                              "exc_page_fault", "asm_exc_page_fault"],
                # a handler no table names (a newer kernel's path, say)
                "unnamed: do_frobnicate_page": ["memcpy_orig", "do_frobnicate_page", "handle_pte_fault",
                                                "__handle_mm_fault", "handle_mm_fault", "exc_page_fault",
                                                "asm_exc_page_fault"]}


def _kinds_profile(kinds: dict[str, int], user: int) -> dict:
    """A profile as ms-run writes it: `kinds` fault samples of each kind, `user` samples in user mode."""
    frames = sorted({f for k in kinds for f in FAULT_CHAINS[k]})
    stacks = [[0, n, 0, [frames.index(f) for f in FAULT_CHAINS[k]], 1] for k, n in kinds.items()]
    total = sum(kinds.values()) + user
    return {"period_ns": 500_000, "samples": total, "kernel_samples": sum(kinds.values()), "frames": frames,
            "executables": [["worker", total, 1]], "stacks": stacks + [[0, user, 0, [], 0]]}


def _faulting(kinds: dict[str, int], user: int = 400, munmap: int = 10, chain: tuple[str, ...] = ()):
    """`chain`: the user call chain of every CPU sample (none: no user chains sampled)."""
    from memsleuth.records.evidence import Sample
    from memsleuth.analysis.view import CellView
    n = sum(kinds.values())
    doc = {"status": "ok", "wall_ns": 2 * 10**9, "user_ns": user * 500_000, "sys_ns": n * 500_000,
           "minflt": 400_000, "maxrss_kb": 1_700_000, "syscalls": {"mmap": 10, "munmap": munmap, "madvise": 0, "brk": 5}}
    stacks = {"period_ns": 500_000, "samples": n + user, "kernel": n, "functions": sorted(chain),
              "stacks": [["prog", 1, n, [sorted(chain).index(f) for f in chain]],
                         ["prog", 0, user, [sorted(chain).index(f) for f in chain]]]} if chain else None
    return CellView("pool", "glibc", [Sample.from_msrun(doc)],
                    explain=[Sample.from_msrun({**doc, "cpu_profile": _kinds_profile(kinds, user),
                                                "cpu_stacks": stacks})])


def test_copy_on_write_faults_are_named_as_such_never_as_fresh_memory():
    """A fork pool whose workers write the parent's pages (CPython's refcounts): 89% of the resolved fault
    samples copied a page. The faults are named copy-on-write, with its own advice, and first-touch claims
    at most the zero-fill part."""
    from memsleuth.analysis import findings
    v = _faulting({"copy-on-write": 890, "small-page zero-fill": 110},
                  chain=("list_item", "_PyEval_EvalFrameDefault", "PyEval_EvalCode", "Py_RunMain", "main"))
    found = {f.id: f for f in findings.for_cell(v)}
    cow = found["copy-on-write-faults"]
    assert "fork" in cow.mechanism and "gc.freeze()" in cow.advice and "89%" in cow.evidence[0]
    # CPython's own advice only where CPython runs the program (a Perl fork pool got it before)
    for chain in ((), ("Perl_hv_iternext_flags", "Perl_runops_standard", "perl_run", "main")):
        other = {f.id: f for f in findings.for_cell(_faulting({"copy-on-write": 890, "small-page zero-fill": 110},
                                                              chain=chain))}["copy-on-write-faults"]
        assert "CPython" not in other.advice and "gc.freeze" not in other.advice and "threads" in other.advice
    faults = v.kernel_split(v.process).cost("page-faults")
    assert cow.cost_ns == pytest.approx(0.89 * faults)
    ft = found.get("first-touch")
    assert ft is None or ft.cost_ns <= 0.11 * faults * 1.0001
    assert sum(f.cost_share for f in found.values() if f.cost_share is not None) <= 1.0


def test_file_backed_faults_are_not_called_fresh_memory():
    from memsleuth.analysis import findings
    v = _faulting({"file-backed": 1000})
    ids = [f.id for f in findings.for_cell(v)]
    assert "file-backed-faults" in ids and "first-touch" not in ids and "zero-page-read" not in ids, ids


def test_a_zero_fill_profile_keeps_first_touch_and_names_no_other_kind():
    from memsleuth.analysis import findings
    ids = [f.id for f in findings.for_cell(_faulting({"small-page zero-fill": 1000}))]
    assert "first-touch" in ids and not any(i.endswith("-faults") for i in ids), ids


@pytest.mark.parametrize("kind,fid,words", [
    ("private file copy", "private-file-copy-faults", "read() the file once"),
    ("shared file write", "shared-file-write-faults", "sync less often"),
    ("NUMA hinting", "numa-hinting-faults", "numa_balancing"),
    ("hugetlbfs", "hugetlbfs-faults", "MAP_POPULATE"),
    ("mmap_lock wait", "mmap-lock-wait-faults", "mmap_threshold"),
    ("direct reclaim or compaction", "direct-reclaim-or-compaction-faults", "THP defrag"),
    ("memory-limit reclaim", "memory-limit-reclaim-faults", "MemoryMax"),
])
def test_numa_hinting_and_hugetlbfs_faults_have_their_own_words(kind, fid, words):
    from memsleuth.analysis import findings
    found = {f.id: f for f in findings.for_cell(_faulting({kind: 900, "small-page zero-fill": 100}))}
    assert fid in found and words in found[fid].advice, list(found)
    ft = found.get("first-touch")
    assert ft is None or ft.cost_share <= 0.11 * found[fid].cost_share / 0.9


def test_a_fault_kind_memsleuth_does_not_name_is_said_as_unknown_at_its_size():
    """Faults whose chain shows a handler no table names: an unknown-faults finding that names the
    handler and gives no advice of its own; first-touch claims only the zero-fill part."""
    from memsleuth.analysis import findings
    v = _faulting({"unnamed: do_frobnicate_page": 700, "small-page zero-fill": 300})
    found = {f.id: f for f in findings.for_cell(v)}
    u = found["unknown-faults"]
    assert "does not name" in u.title and "do_frobnicate_page 70%" in u.mechanism
    faults = v.kernel_split(v.process).cost("page-faults")
    assert u.cost_ns == pytest.approx(0.7 * faults)
    assert "no advice of its own" in u.advice
    ft = found.get("first-touch")
    assert ft is None or ft.cost_ns <= 0.3 * faults * 1.0001
    assert sum(f.cost_share for f in found.values() if f.cost_share is not None) <= 1.0


def test_a_lock_a_kinds_own_handler_waits_for_stays_that_kinds():
    chain = ["rwsem_down_read_slowpath", "filemap_fault", "__do_fault", "do_read_fault", "handle_mm_fault",
             "exc_page_fault", "asm_exc_page_fault"]
    assert classify(chain) == (FAULT, "file-backed")


def test_the_generic_fault_path_is_not_an_unnamed_kind():
    """A sample in the fault path's own code (accounting, the dispatcher) shows no kind: it is taken
    to be like the others, never called unknown."""
    for chain in (["mm_account_fault", "handle_mm_fault", "do_user_addr_fault", "exc_page_fault"],
                  ["handle_pte_fault", "__handle_mm_fault", "handle_mm_fault", "exc_page_fault"],
                  ["lock_vma_under_rcu", "do_user_addr_fault", "exc_page_fault", "asm_exc_page_fault"]):
        assert classify(chain) == (FAULT, cpu_profile.UNRESOLVED_FAULT), chain


def test_no_cell_of_the_stored_runs_has_time_findings_over_its_cpu_time():
    """Every stored run in tests/data (a .db, or one gzipped): a cell's time findings add up to at most
    its CPU time."""
    import gzip
    import shutil
    import tempfile
    from memsleuth.analysis.summary import analyse_check, analyse_run
    from memsleuth.records.store import Store
    dbs = sorted([*DATA.glob("*.db"), *DATA.glob("*.db.gz")])
    assert len(dbs) >= 6
    for db in dbs:
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / db.name.removesuffix(".gz")
            with (gzip.open(db) if db.suffix == ".gz" else open(db, "rb")) as src, open(copy, "wb") as dst:
                shutil.copyfileobj(src, dst)
            store = Store(str(copy), readonly=True)
            for r in store.list_runs():
                run = store.load_run(r.id)
                if run.kind == "check":
                    groups = [analyse_check(run).findings]
                else:
                    groups = [c.findings for g in analyse_run(run).groups for c in g.cells]
                for found in groups:
                    total = sum(f.cost_share for f in found if f.cost_share is not None and f.cost_ns is not None)
                    assert total <= 1.0 + 1e-9, (db.name, r.id, [(f.id, f.cost_share) for f in found])
            store.close()


def test_huge_page_zero_fill_is_first_touch_that_names_huge_pages_and_never_advises_them():
    """Faults that zero whole 2 MiB pages (a sparse table asked for huge pages): the first touches are
    said to zero huge pages, and the advice is to leave them off, not to ask for them."""
    from memsleuth.analysis import findings
    found = {f.id: f for f in findings.for_cell(_faulting({"huge-page zero-fill": 950, "small-page zero-fill": 50}))}
    ft = found["first-touch"]
    assert any("huge page" in e for e in ft.evidence) and "MADV_NOHUGEPAGE" in ft.advice
    assert "use huge pages" not in ft.advice and not any(i.endswith("-faults") for i in found), list(found)


def test_few_faults_that_zero_huge_pages_are_first_touch_at_their_size():
    """A Rust program on mimalloc, its arena asked for huge pages: 266 faults took 573 ms zeroing whole
    2 MiB pages, 248 MiB resident at the peak. At a page each they read 1 MiB, under first-touch's 64 MiB
    floor, and only "99% of the CPU time is in the kernel" spoke. Now at most a huge page each and at
    most the peak RSS."""
    from memsleuth.analysis import findings
    from memsleuth.records.evidence import Sample
    from memsleuth.analysis.view import CellView
    doc = {"status": "ok", "wall_ns": 6 * 10**8, "user_ns": 8 * 10**6, "sys_ns": 595 * 10**6, "minflt": 266,
           "maxrss_kb": 254_000, "syscalls": {"mmap": 16, "munmap": 2, "madvise": 65, "brk": 3}}
    v = CellView("rmi", "glibc", [Sample.from_msrun(doc)],
                 explain=[Sample.from_msrun({**doc, "cpu_profile": _kinds_profile({"huge-page zero-fill": 1000}, 20)})])
    ft = {f.id: f for f in findings.for_cell(v)}["first-touch"]
    assert ft.numbers["fault_bytes"] == 254_000 * 1024, ft.numbers           # the peak RSS, not 266 pages
    assert "most of their time zeroing whole 2 MiB huge pages" in ft.evidence[0] and "huge pages" in ft.mechanism
    assert "MADV_NOHUGEPAGE" in ft.advice


def test_the_address_space_copied_by_fork_and_torn_down_by_exec_is_counted():
    frames = ["copy_page_range", "dup_mmap", "kernel_clone", "__x64_sys_clone", "do_syscall_64",
              "unmap_vmas", "exit_mmap", "__mmput", "exec_mmap", "bprm_execve", "__x64_sys_execve",
              "load_elf_binary", "clear_page_erms"]
    doc = {"samples": 400, "period_ns": 1000000, "frames": frames,
           "executables": [["parent", 300, 1], ["true", 100, 120]],
           "stacks": [[0, 150, 0, [0, 1, 2, 3, 4]],            # fork copying page tables
                      [1, 100, 0, [5, 6, 7, 8, 9, 10, 4]],    # exec tearing the copy down
                      [1, 30, 0, [11, 9, 10, 4]],             # exec loading the program
                      [0, 120, 0, []]]}
    p = cpu_profile.read(doc)
    assert p.counts == {"clone": 150, cpu_profile.EXEC: 130, USER: 120}
    assert p.address_space == {"copy": 150, "teardown in exec": 100}


def _spawning(copy: bool, spawn: int = 300, user: int = 100, started: int = 120):
    """A parent that starts processes: `spawn` samples in fork and exec (their chains copying and
    tearing down the parent's page tables where `copy`), `user` in user mode."""
    from memsleuth.records.evidence import Sample
    from memsleuth.analysis.view import CellView
    fork = (["copy_pte_range", "copy_page_range", "dup_mmap"] if copy else ["alloc_pid"]) + \
        ["copy_process", "kernel_clone", "__x64_sys_clone", "do_syscall_64"]
    exe = (["unmap_vmas", "exit_mmap", "__mmput", "exec_mmap"] if copy else ["load_elf_binary"]) + \
        ["bprm_execve", "__x64_sys_execve", "do_syscall_64"]
    frames = sorted(set(fork + exe))
    total = spawn + user
    prof = {"period_ns": 1_000_000, "samples": total, "frames": frames,
            "executables": [["parent", total - 50, 1], ["true", 50, started]],
            "stacks": [[0, spawn // 2, 0, [frames.index(f) for f in fork]],
                       [1, spawn - spawn // 2, 0, [frames.index(f) for f in exe]], [0, user, 0, []]]}
    doc = {"status": "ok", "wall_ns": 2 * 10**9, "user_ns": user * 10**6, "sys_ns": spawn * 10**6,
           "minflt": 1000, "maxrss_kb": 600_000, "syscalls": {"mmap": 10, "munmap": 10, "madvise": 0, "brk": 5}}
    return CellView("fork", "glibc", [Sample.from_msrun(doc)],
                    explain=[Sample.from_msrun({**doc, "cpu_profile": prof})])


def test_processes_started_from_a_large_parent_are_worded_from_the_page_table_copy():
    from memsleuth.analysis.findings import process_creation
    (f,) = process_creation.check(_spawning(copy=True))
    assert f.id == "process-creation" and f.cost_share == pytest.approx(0.75)
    assert "page tables" in f.mechanism and "posix_spawn" in f.advice
    assert "120 programs were exec'd beside the command" in " ".join(f.evidence)
    (g,) = process_creation.check(_spawning(copy=False))     # a small parent: the starts themselves
    assert "page tables" not in g.mechanism and "fewer processes" in g.advice
    assert process_creation.check(_spawning(copy=True, spawn=10, user=990)) == []     # 1%: not material
    # a short program's own start (ms-run's fork and its exec, 12% of 120 ms): not processes started again and again
    assert process_creation.check(_spawning(copy=True, spawn=15, user=105, started=0)) == []


def test_mprotect_toggled_per_task_is_its_own_finding_above_its_floor():
    from memsleuth.analysis.findings import mprotect_calls
    from test_costs import process, view
    (f,) = mprotect_calls.check(view(process(user_ms=100, sys_ms=1300, syscalls={"mprotect": 800_000})))
    assert f.id == "mprotect-calls" and f.calls == "mprotect" and 0.5 < f.cost_share <= 1.0
    assert "800,000 mprotect calls" in f.evidence[0]
    # a thread's guard page per thread created: set-up, whatever it costs
    assert mprotect_calls.check(view(process(user_ms=100, sys_ms=1300, syscalls={"mprotect": 500}))) == []


@pytest.mark.parametrize("common,named,kind,default", [
    # a MAP_SHARED|MAP_ANONYMOUS region: the path it shares with a file's pages is shared memory's too
    (["finish_fault", "do_fault"], ["shmem_fault", "__do_fault", "do_fault"], "shared memory", "file-backed"),
    # a shared file's pages dirtied again after a writeback: do_wp_page's own code is theirs too
    (["do_wp_page", "__handle_mm_fault"], ["ext4_page_mkwrite", "do_page_mkwrite", "do_wp_page", "__handle_mm_fault"],
     "shared file write", "copy-on-write"),
])
def test_a_common_fault_path_goes_to_the_kind_the_chains_name(common, named, kind, default):
    tail = ["handle_mm_fault", "exc_page_fault", "asm_exc_page_fault"]
    common, named = [*common, *tail], [*named, *tail]
    frames = sorted(set(common + named))

    def profile(n_named):
        stacks = [[0, 30, 0, [frames.index(f) for f in common], 1, [0, 30]]]
        if n_named:
            stacks.append([0, n_named, 0, [frames.index(f) for f in named], 1, [0, n_named]])
        return cpu_profile.read({"samples": 30 + n_named, "period_ns": 10**6, "frames": frames, "stacks": stacks,
                                 "when_bucket_ns": 10**6, "when_span_ns": 32 * 10**6})

    p = profile(70)
    assert p.fault_kinds == {kind: 100} and sum(p.when[f"{FAULT}:{kind}"]) == 100
    assert profile(0).fault_kinds == {default: 30}          # nothing names the other kind: the first's, as before


@pytest.mark.parametrize("frames,kind", [
    # 6.18 inlines do_cow_fault into do_fault: the copy, or the private page allocated for it, is its work
    (["copy_mc_enhanced_fast_string", "do_fault", "__handle_mm_fault"], "private file copy"),
    (["get_page_from_freelist", "__alloc_frozen_pages_noprof", "alloc_pages_mpol", "vma_alloc_folio_noprof",
      "do_fault", "__handle_mm_fault"], "private file copy"),
    # older kernels name it
    (["copy_user_highpage", "do_cow_fault", "do_fault", "__handle_mm_fault"], "private file copy"),
    # reading the file's page for it, or a read fault: a file's
    (["filemap_get_entry", "__filemap_get_folio", "filemap_fault", "__do_fault", "do_fault"], "file-backed"),
    # memory pressure inside it stays memory pressure
    (["try_to_free_pages", "__alloc_pages_direct_reclaim", "alloc_pages_mpol", "vma_alloc_folio_noprof",
      "do_fault"], "direct reclaim or compaction"),
])
def test_a_private_file_mappings_copy_is_its_own_kind(frames, kind):
    assert classify([*frames, "handle_mm_fault", "exc_page_fault", "asm_exc_page_fault"]) == (FAULT, kind)


def _threading(clone: int = 900, user: int = 100, processes: int = 1, exec_started: int = 0, waits: int = 0,
               futex: int = 40_000, tasks: int | None = None, events_by: str | None = None, ends: int = 0,
               teardown: int = 0):
    """A program that creates a thread per task: `clone` samples in clone3, `waits` in futex, `user` in
    user mode, a tree of `processes` processes; `futex` calls counted, `tasks` created on the machine."""
    from memsleuth.records.evidence import Sample
    from memsleuth.analysis.view import CellView
    frames = ["copy_process", "kernel_clone", "__x64_sys_clone3", "do_syscall_64", "do_futex", "__x64_sys_futex",
              "do_exit", "__x64_sys_exit", "exit_mmap", "__x64_sys_exit_group", "do_group_exit"]
    kernel = clone + waits + ends + teardown
    prof = {"period_ns": 1_000_000, "samples": kernel + user, "frames": frames,
            "executables": [["server", kernel + user, processes],
                            *([["true", 1, exec_started]] if exec_started else [])],
            "stacks": [[0, clone, 0, [0, 1, 2, 3]], [0, user, 0, []], *([[0, waits, 0, [4, 5, 3]]] if waits else []),
                       *([[0, ends, 0, [6, 7, 3]]] if ends else []),
                       *([[0, teardown, 0, [8, 6, 10, 9, 3]]] if teardown else [])]}
    doc = {"status": "ok", "wall_ns": 2 * 10**9, "user_ns": user * 10**6, "sys_ns": kernel * 10**6,
           "minflt": 1000, "maxrss_kb": 2_000, "syscalls": {"mmap": 10, "munmap": 10, "futex": futex},
           "machine_tasks_created": tasks, "events_by": events_by}
    return CellView("threads", "glibc", [Sample.from_msrun(doc)],
                    explain=[Sample.from_msrun({**doc, "cpu_profile": prof})])


def test_a_thread_per_task_is_thread_creation_not_processes_or_nothing():
    """40,000 threads created and joined (clone3 94% of the CPU time, one process): its own finding,
    at the clones' share, with a pool as the change; a tree of many processes is process_creation's."""
    from memsleuth.analysis.findings import process_creation, thread_creation
    (f,) = thread_creation.check(_threading())
    assert f.id == "thread-creation" and f.cost_share == pytest.approx(0.9) and f.who == "program"
    assert "thread pool" in f.advice and "1 process:" in " ".join(f.evidence)
    assert process_creation.check(_threading()) == []
    assert thread_creation.check(_threading(clone=20, user=980)) == []                # 2%: not material
    assert thread_creation.check(_threading(processes=40, exec_started=40)) == []     # processes, not threads


def test_threads_ending_are_part_of_thread_creation_a_process_tearing_its_memory_down_is_not():
    """Sampled on the command's cgroup, a thread per task shows its threads' ends (exit, no address space
    torn down) beside the clones: both are the finding's cost; the process's own exit, which tears its
    memory down, is not."""
    from memsleuth.analysis.findings import thread_creation
    (f,) = thread_creation.check(_threading(clone=500, ends=350, teardown=50, user=100))
    assert f.cost_share == pytest.approx(0.85)
    assert "the threads' ends (exit) 41%" in f.evidence[0] and "clone3 59%" in f.evidence[0], f.evidence[0]


def test_thread_creation_says_memsleuths_events_cost_more_only_where_they_were_copied_into_each_thread():
    """Inherited events (a copy in every new thread) make each clone cost more in the runs measured: said
    where the runs' events were inherited or the document does not say, never on the command's cgroup."""
    from memsleuth.analysis.findings import thread_creation
    copied = "copied into every new thread"
    for by, said in (("inherited", True), (None, True), ("cgroup", False)):
        (f,) = thread_creation.check(_threading(events_by=by))
        assert (copied in " ".join(f.evidence)) is said, (by, f.evidence)


def test_joining_threads_created_per_task_is_not_lock_contention():
    """The futex calls of a thread per task (40,000 joins, 2% of the CPU time) wait for threads to end:
    no lock-contention finding beside thread creation's."""
    from memsleuth.analysis.findings import lock_contention
    assert lock_contention.check(_threading()) == []
    assert [f.id for f in lock_contention.check(_threading(clone=20, user=980))] == ["lock-contention"]


def test_joins_that_cost_are_still_no_lock_contention_where_the_tasks_created_explain_the_calls():
    """On a busy machine the joins' waits cost more (8% of the CPU time here): at about one futex call
    per task the machine created they are still the joins; ten per task are a lock as well."""
    from memsleuth.analysis.findings import lock_contention
    assert lock_contention.check(_threading(clone=820, waits=80, tasks=40_050)) == []
    (f,) = lock_contention.check(_threading(clone=820, waits=80, futex=400_000, tasks=40_050))
    assert f.id == "lock-contention" and f.cost_share == pytest.approx(0.08, abs=0.01)
    # headed by its cost, as every finding is (the waiting itself is not CPU time)
    assert f.title.startswith("Lock contention: threads wait for each other in the kernel (futex); the calls "
                              "themselves ") and "% of the CPU time" in f.title, f.title
    # where the tasks were not read, a material futex cost stays a finding
    assert [f.id for f in lock_contention.check(_threading(clone=820, waits=80))] == ["lock-contention"]


def _locking(lock: int = 770, munmap: int = 130, user: int = 100):
    """A job that maps, locks, unlocks and unmaps 32 MiB: `lock` samples in mlock and munlock, `munmap`
    in munmap, `user` in user mode."""
    from memsleuth.records.evidence import Sample
    from memsleuth.analysis.view import CellView
    frames = ["populate_vma_page_range", "do_mlock", "__x64_sys_mlock", "__x64_sys_munlock", "do_syscall_64",
              "unmap_vmas", "__x64_sys_munmap"]
    total = lock + munmap + user
    prof = {"period_ns": 1_000_000, "samples": total, "frames": frames, "executables": [["job", total, 1]],
            "stacks": [[0, lock - lock // 8, 0, [0, 1, 2, 4]], [0, lock // 8, 0, [1, 3, 4]],
                       [0, munmap, 0, [5, 6, 4]], [0, user, 0, []]]}
    doc = {"status": "ok", "wall_ns": 2 * 10**9, "user_ns": user * 10**6, "sys_ns": (lock + munmap) * 10**6,
           "minflt": 100, "maxrss_kb": 40_000, "syscalls": {"mmap": 120, "munmap": 120}}
    return CellView("lock", "glibc", [Sample.from_msrun(doc)], explain=[Sample.from_msrun({**doc, "cpu_profile": prof})])


def test_memory_locked_per_job_is_named_at_its_sampled_share():
    """mlock and munlock, which the measured runs do not count, hold 77% of the CPU time: one finding for
    the family at that share, worded as locking (the whole range faulted in and pinned), never left
    unnamed beside the churn finding on munmap's 13%."""
    from memsleuth.analysis.findings import memory_calls
    (f,) = memory_calls.check(_locking())
    assert f.id == "memory-locking" and f.cost_share == pytest.approx(0.77)
    assert "mlock, munlock" in f.title and "pins" in f.mechanism and "locked pool" in f.advice
    assert memory_calls.check(_locking(lock=30, munmap=100, user=870)) == []       # 3%: not material


@pytest.mark.parametrize("frames,kind", [
    # 6.18's chains of a write to a clean page of a MAP_SHARED file (wp_page_shared inlined into do_wp_page)
    (["__block_write_begin_int", "block_page_mkwrite", "ext4_page_mkwrite", "do_page_mkwrite", "do_wp_page",
      "__handle_mm_fault"], "shared file write"),
    (["block_dirty_folio", "fault_dirty_shared_page", "do_wp_page", "__handle_mm_fault"], "shared file write"),
    (["pte_mkwrite", "finish_mkwrite_fault", "do_wp_page", "__handle_mm_fault"], "shared file write"),
    (["xfs_ilock", "xfs_filemap_page_mkwrite", "do_page_mkwrite", "do_shared_fault", "do_fault"],
     "shared file write"),
    # a copy is copy-on-write; do_wp_page's own code is the path both share, shared out in read()
    (["copy_mc_enhanced_fast_string", "wp_page_copy", "do_wp_page", "__handle_mm_fault"], "copy-on-write"),
    (["vm_normal_page", "do_wp_page", "__handle_mm_fault"], cpu_profile.WRITE_PROTECT),
    # the shared path's dirtying of a fresh fault on a file or shmem page stays theirs
    (["block_dirty_folio", "fault_dirty_shared_page", "do_shared_fault", "do_fault"], cpu_profile.FILE_OR_SHARED),
])
def test_a_write_that_dirties_a_shared_file_page_is_not_copy_on_write(frames, kind):
    assert classify([*frames, "handle_mm_fault", "exc_page_fault", "asm_exc_page_fault"]) == (FAULT, kind)



def test_reclaim_for_a_memory_cgroups_limit_is_not_the_machine_short_of_memory():
    """6.18's chain of a fault in a 96 MiB cgroup on a machine with 21 GiB free: the group's limit."""
    memcg = ["shrink_folio_list", "shrink_lruvec", "shrink_node", "do_try_to_free_pages",
             "try_to_free_mem_cgroup_pages", "try_charge_memcg", "charge_memcg", "__mem_cgroup_charge",
             "filemap_add_folio", "page_cache_ra_order", "filemap_fault", "__do_fault", "do_read_fault"]
    machine = ["shrink_node", "do_try_to_free_pages", "try_to_free_pages", "__alloc_pages_direct_reclaim",
               "__alloc_pages_slowpath", "alloc_anon_folio", "do_anonymous_page"]
    tail = ["handle_mm_fault", "exc_page_fault", "asm_exc_page_fault"]
    assert classify([*memcg, *tail]) == (FAULT, "memory-limit reclaim")
    assert classify([*machine, *tail]) == (FAULT, "direct reclaim or compaction")
    # a charge that reclaims nothing is the fault's own kind
    assert classify(["try_charge_memcg", "charge_memcg", "__mem_cgroup_charge", "filemap_add_folio",
                     "filemap_fault", "__do_fault", "do_read_fault", *tail]) == (FAULT, "file-backed")


def test_a_file_kept_mapped_and_read_again_is_not_told_to_stop_mapping_it_per_request():
    """A 256 MiB file scanned through one mapping in a 96 MiB cgroup: 2 munmap calls. Its file-backed
    faults are pages read again after the page cache dropped them, not a mapping made per use."""
    from memsleuth.analysis import findings
    kept = {f.id: f for f in findings.for_cell(_faulting({"file-backed": 1000}, munmap=2))}["file-backed-faults"]
    assert "per request" not in kept.advice and "MADV_WILLNEED" in kept.advice and "again at every pass" in kept.mechanism
    per_use = {f.id: f for f in findings.for_cell(_faulting({"file-backed": 1000}, munmap=40))}["file-backed-faults"]
    assert "instead of mapping it per request" in per_use.advice


def test_a_tree_that_starts_programs_again_and_again_hears_of_their_starts_in_its_file_faults():
    """`check -- make -j2` of 13 C files: 43% of the fault samples file-backed, and the only advice was to
    keep a data file mapped across uses. Where the tree started many programs and most of the fault time
    is in programs started more than once, the file kinds name the starts first, with the programs."""
    from memsleuth.analysis import findings
    from memsleuth.records.evidence import Sample
    from memsleuth.analysis.view import CellView

    def tree(exes: list[tuple[str, int, int]]) -> CellView:
        """exes: (name, file-backed fault samples, processes); 400 user samples in the first."""
        frames = sorted(FAULT_CHAINS["file-backed"])
        chain = [frames.index(f) for f in FAULT_CHAINS["file-backed"]]
        n = sum(k for _, k, _ in exes)
        stacks = [[i, k, 0, chain, 1] for i, (_, k, _) in enumerate(exes)] + [[0, 400, 0, [], 0]]
        profile = {"period_ns": 500_000, "samples": n + 400, "kernel_samples": n, "frames": frames,
                   "executables": [[name, k + (400 if i == 0 else 0), procs] for i, (name, k, procs) in enumerate(exes)],
                   "stacks": stacks}
        doc = {"status": "ok", "wall_ns": 2 * 10**9, "user_ns": 400 * 500_000, "sys_ns": n * 500_000,
               "minflt": 40_000, "maxrss_kb": 60_000, "syscalls": {"mmap": 900, "munmap": 300, "madvise": 0, "brk": 50}}
        return CellView("make", "glibc", [Sample.from_msrun(doc)],
                        explain=[Sample.from_msrun({**doc, "cpu_profile": profile})])

    build = {f.id: f for f in findings.for_cell(tree([("make", 50, 1), ("cc1", 600, 13), ("as", 250, 13),
                                                      ("gcc", 100, 13)]))}["file-backed-faults"]
    assert build.advice.startswith("where they are the starts of the programs the evidence names: start fewer"), build.advice
    assert "every start of a program faults in" in build.mechanism
    (line,) = [e for e in build.evidence if "exec'd beside the command" in e]
    assert line.startswith("39 programs were exec'd") and "cc1 (13 processes) 60%" in line and "95% in programs" in line
    # one program that maps files, or a tree whose restarted programs fault little: as before
    for exes in ([("reader", 1000, 1)], [("reader", 800, 1), ("sh", 200, 20)]):
        alone = {f.id: f for f in findings.for_cell(tree(exes))}["file-backed-faults"]
        assert alone.advice.startswith("keep the file mapped"), (exes, alone.advice)
        assert not any("exec'd beside" in e for e in alone.evidence)


def test_the_syscall_entrys_own_samples_are_the_calls_its_executable_made():
    futex = ["futex_wake", "do_futex", "__x64_sys_futex", *SYSCALL]
    write = ["vfs_write", "ksys_write", *SYSCALL]
    frames = sorted(set(futex + write + SYSCALL))

    def stack(exe, n, chain, bucket):
        return [exe, n, 0, [frames.index(f) for f in chain], 0, [bucket, n]]

    stacks = [stack(0, 60, futex, 0), stack(0, 20, write, 1), stack(0, 40, SYSCALL, 2),
              stack(1, 10, SYSCALL, 3)]          # an executable whose chains name no call: its entries stay unnamed
    p = cpu_profile.read({"samples": 130, "period_ns": 10**6, "frames": frames, "stacks": stacks,
                          "executables": [["prog", 120, 1], ["helper", 10, 1]],
                          "when_bucket_ns": 10**6, "when_span_ns": 32 * 10**6})
    assert p.counts == {"futex": 90, "write": 30, cpu_profile.UNNAMED_SYSCALL: 10}
    assert p.by_executable == {"prog": {"futex": 90, "write": 30}, "helper": {cpu_profile.UNNAMED_SYSCALL: 10}}
    for cls, n in p.counts.items():          # every sample keeps its time: the entries' moved with them
        assert sum(p.when[cls]) == n, cls
    assert p.when["futex"][2] + p.when["write"][2] + p.when[cpu_profile.UNNAMED_SYSCALL][2] == 40


def test_faults_that_zero_huge_pages_are_never_counted_as_small_pages():
    """A Rust program on mimalloc (its arena asked for huge pages): 266 faults took 573 ms, each zeroing a
    whole 2 MiB page; the kernel-time finding read "page faults: 266 = 1.0 MiB"."""
    from memsleuth.analysis.findings import kernel_time
    (f,) = kernel_time.check(_faulting({"huge-page zero-fill": 1000}))
    line = next(e for e in f.evidence if e.startswith("page faults: "))
    assert "zeroing whole 2 MiB huge pages" in line and "= 1562.5 MiB" not in line, line
    assert "huge pages" in f.mechanism
    (small,) = kernel_time.check(_faulting({"small-page zero-fill": 1000}))
    assert "= 1562.5 MiB" in next(e for e in small.evidence if e.startswith("page faults: "))


def test_a_quiet_run_never_says_it_counted_no_faults_when_it_counted_some():
    """`openssl speed -multi 2`: 877 page faults and 65 memory system calls counted, none of the explaining
    run's samples in them; the line read "no page faults or memory system calls counted"."""
    from memsleuth.analysis import findings
    line = findings.quiet_line(_faulting({}))
    assert "no page faults" not in line and "400,000 page faults and 25 memory system calls counted, and none of " \
        "the explaining run's samples fell in them" in line, line


def test_the_samplers_own_perf_event_open_calls_are_memsleuths_never_the_programs():
    """`check -- sh -c "seq 400 | xargs -P2 ... md5sum"`: the call-site sampler opens its events in each
    of the 400 processes, 10% of the explaining run's samples, which the report named as the program's
    perf_event_open time. Where the executable mapped the sampler they are memsleuth's own; they are
    then left out of the kernel time shared out to the program's paths, as the syscall tracing is."""
    from memsleuth.analysis import cost
    from memsleuth.records.model import Counts
    peo = ["perf_event_open_impl", "__do_sys_perf_event_open", "__x64_sys_perf_event_open", *SYSCALL]
    fault = ["clear_page_erms", "do_anonymous_page", "handle_mm_fault", "exc_page_fault", "asm_exc_page_fault"]
    frames = sorted(set(peo + fault))
    stacks = [[0, 100, 0, [frames.index(f) for f in peo], 0], [1, 20, 0, [frames.index(f) for f in peo], 0],
              [0, 300, 0, [frames.index(f) for f in fault], 1], [0, 580, 0, [], 0]]
    doc = {"samples": 1000, "period_ns": 10**6, "frames": frames, "stacks": stacks,
           "preload": ["/x/libmsheap.so", "/x/libmssites.so"],
           "executables": [["md5sum", 980, 400, 400, [400, 400]], ["static", 20, 1, 1, [0, 0]]]}
    p = cpu_profile.read(doc)
    assert p.counts[cpu_profile.SAMPLER_OWN] == 100 and p.counts["perf_event_open"] == 20, p.counts
    sc = SimpleNamespace(user_ns=6e8, sys_ns=4e8, wall_ns=1e9, minflt=30_000, syscalls=Counts())
    split = cost.sampled(sc, p, Counts({"page-faults": 30_000, "wall_ns": 1e9}))
    # the faults' part of the kernel time: 300 of the 320 samples that are the program's, not of 420
    assert split.parts["page-faults"] == pytest.approx(4e8 * 300 / 320)


def test_a_lock_and_the_allocators_code_are_one_account_of_the_cpu_time():
    """check-arena-lock.db: four threads freeing and allocating 2-3.5 KiB blocks in one glibc arena
    (mallopt M_ARENA_MAX 1), checked beside two busy loops. Its explaining run spent 58% of its
    samples in user mode, its measured run 40% of its CPU time: read as shares of all the samples,
    the allocator's code (53%) and the futex calls (58%) claimed 111% of the CPU time. In one account
    the user-mode part is a share of the measured user time, and memsleuth's own counting of the
    futex calls is said at its size."""
    from memsleuth.analysis.summary import analyse_check
    from memsleuth.records.store import Store
    store = Store(str(DATA / "check-arena-lock.db"), readonly=True)
    a = analyse_check(store.load_run(store.list_runs()[0].id))
    store.close()
    timed = {f.id: f.cost_share for f in a.findings if f.cost_share is not None and f.cost_ns}
    assert set(timed) == {"lock-contention", "allocator-time"}, timed
    assert sum(timed.values()) <= 1.0 and timed["lock-contention"] > 0.5, timed
    whole = a.view.process
    assert timed["allocator-time"] <= whole.user_ns / (whole.user_ns + whole.sys_ns)
    assert a.counting is not None and "futex" in a.counting.text and "of the CPU time" in a.counting.text


def test_uncounted_kernel_paths_are_parts_of_the_same_split_of_the_kernel_time():
    """clone's samples (not counted in the measured runs) and futex's (counted) share one measured
    kernel time: together never more than it, whatever share of its samples the explaining run's
    own tracing or user mode took."""
    from memsleuth.analysis import cost
    from memsleuth.analysis.view import CellView
    from memsleuth.records.evidence import Sample
    clone = ["copy_process", "kernel_clone", "__x64_sys_clone", *SYSCALL]
    futex = ["futex_wake", "do_futex", "__x64_sys_futex", *SYSCALL]
    tracing = ["perf_syscall_enter", "syscall_trace_enter", *SYSCALL]
    frames = sorted(set(clone + futex + tracing))
    stacks = [[0, n, 0, [frames.index(f) for f in chain], 0, [0, n]]
              for n, chain in ((300, clone), (300, futex), (300, tracing), (100, []))]
    profile = {"samples": 1000, "period_ns": 10**6, "frames": frames, "stacks": stacks,
               "executables": [["prog", 1000, 1]], "when_bucket_ns": 10**6, "when_span_ns": 32 * 10**6}
    doc = {"status": "ok", "wall_ns": 10**9, "user_ns": 5 * 10**8, "sys_ns": 5 * 10**8, "minflt": 0,
           "maxrss_kb": 10_000, "counters": {}, "syscalls": {"futex": 30_000}, "unsupported": {}, "probe": []}
    explain = Sample.from_msrun({**doc, "syscalls": {"futex": 30_000}, "cpu_profile": profile})
    view = CellView("c", "glibc", [Sample.from_msrun(doc)], explain=[explain])
    split = view.kernel_split(view.process)
    part = cost.sampled_part(split, ("clone",))
    assert part.samples == 300 and part.ns == pytest.approx(split.class_ns["clone"])
    # half of the measured kernel time each (the tracing is memsleuth's, not the program's)
    assert part.ns == pytest.approx(2.5e8) and split.cost("futex") == pytest.approx(2.5e8)
    assert part.share == pytest.approx(0.25)
