"""Guess first, then look: each lesson says what it expects to see, and we check it against the trace.

Every claim the posts make about a trace (numbered P1-01 … P2-19 in docs/claims.md) is one check here, a function
that returns an `Expectation`, printed by the lesson that makes the trace: announced before profiling, then ✓, or ✗
with the evidence and, when we know it, the reason. A lesson lists its guesses for the run it makes:

    from profiling_in_pytorch import checks as ex

    expectations = [ex.kernels_in_order(("GEMM", "GEMM", "gelu", "mul", "GEMM"), claim="P2-08"), ...]

The checks live by concern, and this package re-exports each module's `__all__`:

    base.py      Expectation and Outcome, announce and check_trace, the known reasons for a ✗, shared helpers
    regime.py    time and regime: steps, overhead- or compute-bound, the GPU lane's lag, the flush, cold and warm
    dispatch.py  what dispatches what: CPU ops, their nesting, compiled regions, shapes, views
    kernels.py   kernels and launches: counts, order, GEMMs, fusion, runtime calls
    training.py  a training step's phases: forward, backward, optimizer
    communication.py  collectives: how many per step, how much of them nothing overlaps (lesson 08)
    data_parallel.py  a data-parallel step's collectives by kind, bucket or unit, and their start in the backward
                 (lesson 09)
    attention.py attention forwards, Part 3 (lessons 04_a … 04_d): how a forward is read and counted; its checks by
                 concern in attention_naive.py (04_a, 04_b), attention_sdpa.py (SDPA's backends: 04_c, 04_d) and
                 attention_occupancy.py (a kernel's footprint and occupancy). A lesson imports those it checks,
                 `from …checks import attention as ac, attention_naive as na`: none is re-exported here (their
                 names are attention's: operations, role, backend_of, ...)
    roofline.py  GEMMs against the GPU's ceiling: FLOPs by trace-report's formula, TFLOP/s, share of the ceiling
    fp8.py       FP8 forwards (lesson 10): FP8 GEMMs and their scale modes, the scaling and cast kernels around them
    memory.py    a training step's memory (lesson 11): its peak, the split by category, what the forward holds,
                 what checkpointing trades: `… import memory as mx`
    graphs.py    a decode loop's forwards, eager or replayed from CUDA graphs (lesson 07): `… import graphs as gx`

A new check goes into the module of its concern, in its `__all__`; a new concern is a new module, imported below.
"""

from profiling_in_pytorch.checks import base, communication, data_parallel, dispatch, fp8, kernels, regime, roofline
from profiling_in_pytorch.checks import training
from profiling_in_pytorch.checks.base import *  # noqa: F403
from profiling_in_pytorch.checks.communication import *  # noqa: F403
from profiling_in_pytorch.checks.data_parallel import *  # noqa: F403
from profiling_in_pytorch.checks.dispatch import *  # noqa: F403
from profiling_in_pytorch.checks.fp8 import *  # noqa: F403
from profiling_in_pytorch.checks.kernels import *  # noqa: F403
from profiling_in_pytorch.checks.regime import *  # noqa: F403
from profiling_in_pytorch.checks.roofline import *  # noqa: F403
from profiling_in_pytorch.checks.training import *  # noqa: F403

__all__ = (base.__all__ + regime.__all__ + dispatch.__all__ + kernels.__all__ + training.__all__ + communication.__all__
           + data_parallel.__all__ + fp8.__all__ + roofline.__all__)
