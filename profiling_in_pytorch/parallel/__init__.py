"""The post's MLP over several processes, one per GPU: tensor parallel (lesson 08) and data parallel (lesson 09).

    launch.py    joining the run torchrun started: the backend (NCCL on GPUs, gloo on a CPU), this rank's GPU,
                 NVLink multicast kept off, rank 0 speaking for all; one-line errors
    sharded.py   the variants' modules: each rank's slices of the weights, DTensor's plan, plain tensors with one
                 all-reduce, the overlapped forward by chunks, sequence parallel, async-TP
    copy_engine.py  overlap-ce: the all-reduce as copy-engine pulls from the peers' symmetric memory, pipelined with
                 down_proj's GEMMs (signal kernels, side streams; a small transport interface the tests run on threads)
    variants.py  the variants by name (which a CUDA graph captures, which split the tokens, which need GPUs), built on
                 this rank, a forward captured in a CUDA graph; it imports sharded and copy_engine, neither imports it
    runs.py      one rank's file names: the lesson's tag, then `_rank<r>`
    timing.py    each variant's forward against one GPU in the same run, every rank in step
    data.py      data parallel: the stacked MLP or a preset, DDP or FSDP2 around it, the collectives each should
                 issue per step, one GPU's training step against N (scaling efficiency)

This package imports torch, `profiling_in_pytorch.mlp` and the lesson's plumbing (`profiling_in_pytorch.lesson`),
as `bench` does; all communication goes through torch.distributed (its symmetric memory for overlap-ce and async-TP).
"""
