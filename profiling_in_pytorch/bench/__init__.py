"""The measuring and reporting behind `benchmark_mlp.py`, which keeps the shapes, the variants and the loop.

Each module holds one thing the benchmark does the same way for every variant: `shapes` (a shape, `--shapes`),
`variants` (what a variant is, its builders), `measure` (one variant at one shape, step by step), `training` (the
same for a forward and a backward, `--train`), `kernels` (kernels and launches per forward, from a profile), `rows`
(one row of results), `pace` (who sets the pace, by trace-report's verdict rule), `floor` (the launch floor), `goals`
(the captured variants' decode goals), `prose` and `table` (what the terminal shows) and `output` (the console, the
JSON, CSV and PNG). The timers and the machine's ceilings are the lessons' too: `profiling_in_pytorch.timers` and
`profiling_in_pytorch.ceilings`, below both. It may import torch, rich and matplotlib, and from this project those
two, `profiling_in_pytorch.mlp`, `checks.roofline`, `lesson.profiling` and `trace_report` (`cli`, `errors`,
`files`); nothing imports it but the benchmark and its tests.
"""
