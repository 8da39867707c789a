"""The measuring and reporting behind `benchmark_mlp.py`, which keeps the shapes, the variants and the loop.

Each module holds one thing the benchmark does the same way for every variant: `shapes` (a shape, `--shapes`),
`variants` (what a variant is, its builders), `measure` (one variant at one shape, step by step), `training` (the
same for a forward and a backward, `--train`), `timing` (the timers and the machine's ceilings), `kernels` (kernels
and launches per forward, from a profile), `rows` (one row of results), `pace` (who sets the pace, by
trace-report's verdict rule), `prose` and `table` (what the terminal shows) and `output` (the console, the JSON,
CSV and PNG). It may import torch, rich and matplotlib, and from this project `profiling_in_pytorch.mlp`, `profiling_in_pytorch.lesson.profiling`,
`trace_report`, `trace_report.cli`, `trace_report.errors` and `trace_report.files`; nothing imports it but the benchmark, its
tests and the lessons' unprofiled timing (`lesson/unprofiled.py`: `timing.back_to_back`, `percentile`, the GPU's
spin clock). `goals` holds the captured variants' decode goals.
"""
