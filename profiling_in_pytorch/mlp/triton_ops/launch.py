"""Launching an already compiled Triton kernel for what a launch costs.

`kernel[grid](*args)` does, on every call, what only the first call needs: it binds the arguments and specializes
each one (dtype, 16-byte alignment, integer divisibility) to find the compiled kernel in its cache, checks the
globals the kernel read, builds launch metadata for the profiler hooks, and for each host-side TMA descriptor
validates it (`TensorDescriptor.__post_init__`) and encodes a fresh CUtensorMap. Measured on the H200's host
(torch 2.11, Triton 3.6), CPU µs per call, at 256 tokens so that the GPU never makes the CPU wait:

    an empty kernel through kernel[grid]                                              10.7
    the same through its compiled kernel's launcher (compiled.run)                      5.2
    an ATen add                                                                         9.0
    the gate/up GEMM, descriptors already built, through kernel[grid]                  33.5
    the same through compiled.run (Triton still encodes three CUtensorMaps)            15.1
    the same through the compiled launcher's C function, the CUtensorMaps kept          5.8

`ReadyLaunch` takes the last path, and passes pointers as addresses, which the launcher takes as they are (a
tensor it asks the driver about: cuPointerGetAttribute, once per pointer per launch; the key below already says
the tensors are on the GPU). The caller keys it by everything Triton specializes the kernel on (shapes,
strides, dtypes, device, the pointers' 16-byte alignment), so one compiled kernel, one grid and one set of
integer arguments serve every call with that key; only the tensors change. A TMA descriptor's CUtensorMap
depends only on its tensor's address once shape, strides and tile are fixed: it is encoded once per address
(the weights': once; an activation's: once per address the caching allocator hands out) and kept.

Where that path does not apply it falls back, never to something wrong: under Triton's interpreter the kernel
runs through kernel[grid] with the same arguments (so the tests on a CPU exercise the same cache), and where a
profiler hooks Triton's launches (knobs.runtime.launch_enter_hook, e.g. Proton), where the kernel needs scratch
memory, or where a Triton's launcher is not laid out as 3.6's, through the compiled kernel's own `compiled[grid]`.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Sequence

import torch

try:  # Triton >= 3.4: host-side tensor descriptors (TMA)
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover - older Triton: no descriptor arguments to keep
    TensorDescriptor = None

# Triton reads TRITON_INTERPRET when it decorates the kernels, at import: so does this package.
INTERPRETING = os.environ.get("TRITON_INTERPRET", "0") == "1"
# Kept CUtensorMaps per descriptor argument: more addresses than a forward's rotation of inputs and outputs
# usually sees; past it the cache starts again (encoding one costs about 1 µs).
MAX_MAPS_PER_ARGUMENT = 64


@contextlib.contextmanager
def interpreted(kernel):
    """Under the interpreter the kernel runs as Python on the CPU: name it in a CPU trace as a GPU lane names a
    kernel, and keep numpy's overflow warning inside (exp(-2z) overflows to inf for very negative gate values, and
    g / inf = 0 is the right GELU there, as on a GPU)."""
    with torch.profiler.record_function(kernel.fn.__name__), warnings.catch_warnings():
        warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning)
        yield


def _descriptor(base: torch.Tensor, shape, strides, block_shape, offset: int):
    """A TensorDescriptor without its checks (the first call's `TensorDescriptor.from_tensor` made them for this
    key): a view `offset` elements into `base`."""
    if offset:
        base = base.as_strided(shape, strides, base.storage_offset() + offset)
    desc = TensorDescriptor.__new__(TensorDescriptor)
    desc.__dict__.update(base=base, shape=shape, strides=strides, block_shape=block_shape, padding="zero")
    return desc


def _raw_launcher(launcher):
    """The C launch function behind a compiled kernel's launcher (Triton 3.6's CudaLauncher), or None where it is
    laid out otherwise. With descriptor arguments its `launch` is a Python wrapper that encodes a CUtensorMap per
    descriptor, every call; the C function takes the encoded maps."""
    launch = getattr(launcher, "launch", None)
    if launch is None or getattr(launcher, "global_scratch_size", 1) or getattr(launcher, "profile_scratch_size", 1):
        return None
    code = getattr(launch, "__code__", None)
    if code is None:  # no Python wrapper: no descriptor arguments
        return launch
    cells = dict(zip(code.co_freevars, (cell.cell_contents for cell in launch.__closure__ or ())))
    inner = cells.get("launcher")
    return inner if callable(inner) and not hasattr(inner, "__code__") else None


class ReadyLaunch:
    """One Triton kernel launched again and again with the arguments of its first launch but for its tensors.

    kernel: the @triton.jit function; grid: its grid; args: every argument in the kernel's order, constexprs too,
    as the first launch takes them (TensorDescriptors from `TensorDescriptor.from_tensor`, which checks them);
    options: num_warps, num_stages, launch_pdl. `fed` names the arguments a call supplies, in the order it passes
    them: a tensor argument (or, outside the interpreter, its address as an int), or a descriptor's, or
    (name, offset) for a descriptor of the view that starts `offset` elements into the tensor passed (the same
    shape and strides as the first call's; the tensor's own dtype and shape do not matter, its address does). Constructing it
    launches the kernel once, with `args` (compiling it if need be).

    The caller guarantees that a call's tensors have the first call's shapes, strides, dtypes, device and
    alignment: its cache key holds them.
    """

    def __init__(self, kernel, grid: Sequence[int], args: Sequence, options: dict, fed: Sequence):
        names = list(kernel.arg_names)
        self._kernel, self._options = kernel, options
        self._grid = tuple(grid) + (1,) * (3 - len(grid))
        self._args = list(args)
        self._fed = []  # (position, descriptor (shape, strides, block_shape) or None, offset)
        for entry in fed:
            name, offset = entry if isinstance(entry, tuple) else (entry, 0)
            position = names.index(name)
            arg = self._args[position]
            is_descriptor = TensorDescriptor is not None and isinstance(arg, TensorDescriptor)
            layout = (tuple(arg.shape), tuple(arg.strides), list(arg.block_shape)) if is_descriptor else None
            self._fed.append((position, layout, offset))
        with interpreted(kernel) if INTERPRETING else contextlib.nullcontext():
            compiled = kernel[self._grid](*self._args, **options)
        self._compiled = None if INTERPRETING else compiled
        self._raw = None
        if self._compiled is not None:
            self._prepare_raw(compiled)

    def _prepare_raw(self, compiled) -> None:
        from triton import knobs
        from triton.runtime import driver

        launcher = compiled.run  # loads the binary if the first launch has not
        raw = _raw_launcher(launcher)
        meta = getattr(compiled.metadata, "tensordesc_meta", None)
        descriptors = [i for i, a in enumerate(self._args) if TensorDescriptor is not None and isinstance(a, TensorDescriptor)]
        if raw is None or (descriptors and not meta) or len(descriptors) != len(meta or ()):
            return
        from triton.backends.nvidia.driver import make_tensordesc_arg

        # The flat argument list of the C function: a descriptor becomes its CUtensorMap, then its shape and strides.
        flat, where = [], {}
        for i, arg in enumerate(self._args):
            if i in descriptors:
                desc_meta = meta[descriptors.index(i)]
                where[i] = (len(flat), desc_meta, {})
                flat.extend(make_tensordesc_arg(arg, desc_meta))
            else:
                where[i] = (len(flat), None, None)
                flat.append(arg)
        self._flat = flat
        self._slots = [(*where[position], layout, offset * (self._args[position].base.element_size() if layout else 0))
                       for position, layout, offset in self._fed]
        hooks = knobs.runtime
        self._hooks = (hooks, hooks.launch_enter_hook, hooks.launch_exit_hook)
        self._device, self._stream = driver.active.get_current_device, driver.active.get_current_stream
        self._raw = (raw, compiled.function, launcher.launch_cooperative_grid, launcher.launch_pdl,
                     compiled.packed_metadata)

    def _hooked(self) -> bool:
        """Whether a profiler hooks Triton's launches: they then go through Triton's own launcher, with metadata."""
        runtime, enter, leave = self._hooks
        if runtime.launch_enter_hook is not enter or runtime.launch_exit_hook is not leave:
            return True  # replaced since: Triton's own path decides
        return bool(getattr(enter, "calls", enter)) or bool(getattr(leave, "calls", leave))

    def __call__(self, *tensors: torch.Tensor) -> None:
        if self._raw is not None and not self._hooked():
            flat = self._flat.copy()
            for (index, desc_meta, maps, layout, offset_bytes), t in zip(self._slots, tensors):
                if desc_meta is None:  # an address: the launcher then skips its cuPointerGetAttribute check
                    flat[index] = t if type(t) is int else t.data_ptr()
                    continue
                address = t.data_ptr() + offset_bytes
                tensor_map = maps.get(address)
                if tensor_map is None:
                    tensor_map = self._encode(t, desc_meta, layout, offset_bytes // t.element_size())
                    if len(maps) >= MAX_MAPS_PER_ARGUMENT:
                        maps.clear()
                    maps[address] = tensor_map
                flat[index] = tensor_map
            raw, function, cooperative, pdl, metadata = self._raw
            g0, g1, g2 = self._grid
            raw(g0, g1, g2, self._stream(self._device()), function, cooperative, pdl, None, None, metadata, None, None,
                None, *flat)
            return
        args = self._args.copy()
        for (position, layout, offset), t in zip(self._fed, tensors):
            args[position] = t if layout is None else _descriptor(t, *layout, offset)
        if self._compiled is None:  # the interpreter
            with interpreted(self._kernel):
                self._kernel[self._grid](*args, **self._options)
        else:
            self._compiled[self._grid](*args)

    @staticmethod
    def _encode(t: torch.Tensor, desc_meta: dict, layout, offset: int):
        from triton.backends.nvidia.driver import make_tensordesc_arg

        return make_tensordesc_arg(_descriptor(t, *layout, offset), desc_meta)[0]
