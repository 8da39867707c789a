"""What the lessons, `trace-report` and the benchmark share, by concern:

    trace_report/cli.py, errors.py, files.py   flags and one-line errors (exit 2), atomic writes: standard library only
    profiling_in_pytorch/lesson/                       the lessons' plumbing: device and dtype, file names, export, tables, checks
    trace_report/                       reading traces and checking claims against them: no torch
                                                       (model, source, reader; pace, compare, export; checks/ by
                                                       concern; report: the trace-report command)
    profiling_in_pytorch/mlp/                          the MLPs the lessons profile, and their Triton kernels
    profiling_in_pytorch/bench/                        timing the MLP variants side by side (benchmark_mlp.py)
    profiling_in_pytorch/parallel/                     the MLP over several ranks, tensor parallel (lesson 08): torch.distributed

Imports go one way: `traces` imports only the standard modules above and rich (inside it, the data model and the
file source sit below everything that reads them: traces/__init__ lists the order); `mlp` imports torch, triton and
`errors`; `lesson` imports `traces.checks` and the standard modules; `bench` and `parallel`
may import all of them. Lessons import
the package, never the other way round.
"""
