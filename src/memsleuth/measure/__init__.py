"""The measuring tier: a spec becomes cells (plan), cells become runs (runner, launcher and ms-run,
attach for running processes, perf for call sites), with what they need of the machine
(allocators, tunables, machine facts, the native binaries). Imports records/ and the shared base,
never analysis/ or report/."""
