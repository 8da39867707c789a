"""The suite: the lessons' plumbing, the MLPs and their kernels, the benchmark, and the posts' claims as checks.

    device.py    device and dtype, from the flags; whether a run's tensors fit in the memory free
    timers.py    timers for a GPU and a CPU, forwards back to back: the lessons' unprofiled step, the benchmark
    ceilings.py  what this machine reaches, measured: a large GEMM's rate and a copy's
    lesson/      the lessons' plumbing: flags, file names, export, tables, the unprofiled timing
    checks/      the posts' claims as checks of a trace, one function each, by concern: no torch
    mlp/         the MLPs the lessons profile, and their Triton kernels
    attention/   Part 3's attention forwards and SDPA's backends
    model/       presets, loading and module ranges for profile_model.py
    parallel/    the MLP over several ranks: tensor parallel (lesson 08), data parallel (lesson 09)
    bench/       timing the MLP variants side by side (benchmark_mlp.py)

It stands above trace_report, the trace reader (a package of its own, no torch), whose flags, one-line errors,
atomic writes and console it uses too (trace_report.cli, errors, files, console); nothing in trace_report imports
this package. Inside, `device`, `timers` and `ceilings` stand on torch alone (and trace_report's errors); `mlp`
imports torch and triton; `checks` reads traces through trace_report only; `lesson` imports `checks` and the three
modules above; `bench` and `parallel` may import all of them, and nothing imports `bench`. Lessons import the
package, never the other way round.
"""
