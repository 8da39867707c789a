"""Shared plumbing for the lessons: flags, device choice, the profiling harness, trace reading, Triton kernels."""
