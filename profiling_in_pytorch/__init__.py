"""The suite: the lessons' plumbing, the MLPs and their kernels, the benchmark, and the posts' claims as checks.

    lesson/      the lessons' plumbing: device and dtype, file names, export, tables, the unprofiled timing
    checks/      the posts' claims as checks of a trace, one function each, by concern: no torch
    mlp/         the MLPs the lessons profile, and their Triton kernels
    attention/   Part 3's attention forwards and SDPA's backends
    model/       presets, loading and module ranges for profile_model.py
    parallel/    the MLP over several ranks: tensor parallel (lesson 08), data parallel (lesson 09)
    bench/       timing the MLP variants side by side (benchmark_mlp.py)

It stands above trace_report, the trace reader (a package of its own, no torch), whose flags, one-line errors,
atomic writes and console it uses too (trace_report.cli, errors, files, console); nothing in trace_report imports
this package. Inside, `mlp` imports torch and triton; `checks` reads traces through trace_report only; `lesson`
imports `checks`; `bench` and `parallel` may import all of them. Lessons import the package, never the other way
round.
"""
