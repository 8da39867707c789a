"""The model to profile and its inputs: a transformers model (a preset, a Hub id, a local folder) or a module the user
builds in a factory function. Everything the user can get wrong is one line (UsageError, exit 2); a model or weights
that cannot be had here (no network, nothing cached) and memory that runs out are one line and exit 1.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from trace_report.errors import UsageError, first_line
from profiling_in_pytorch.model.presets import PRESETS

EXIT_CANNOT_RUN = 1
RANDOM_WEIGHTS_NOTE = (
    "random weights (from the config): a dense model runs the same kernels with trained ones, which --pretrained loads"
)
# transformers' Llama computes its rotary frequencies in fp32 (inv_freq @ positions), and Inductor, compiling that
# matmul on a GPU, warns that TF32 is "available but not enabled" (seen on an H100 with torch 2.11, alone on
# profile_model.py --compile's stderr). TF32 would change the model's numerics: the model runs as it was written.
warnings.filterwarnings("ignore", message="TensorFloat32 tensor cores for float32 matrix multiplication available")

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")  # owner/name: bare names are presets or folders


class CannotRunHere(Exception):
    """What no flag fixes on this machine: a model not in the cache without network, memory that ran out."""


def cannot_run_here(message: str) -> None:
    """One line on stderr, exit 1: what cannot work here (UsageError is for what the user can fix: exit 2)."""
    prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "error"
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(EXIT_CANNOT_RUN)


def first_step(step: Callable[[], Any], what: str) -> None:
    """Run the step once, before the profile: a model that does not run with its inputs says so in one line."""
    try:
        step()
    except (torch.OutOfMemoryError, UsageError, KeyboardInterrupt):
        raise
    except Exception as err:  # noqa: BLE001 - the model's own code: whatever it raises is one line, not a traceback
        raise UsageError(f"the first step of {what} raised {type(err).__name__}: {first_line(err)}") from None


@dataclass
class ModelToProfile:
    model: nn.Module
    inputs: tuple | dict  # positional arguments, or keyword arguments
    tag: str  # the model's part of the trace's file name
    description: str  # one line: what it is, where it came from
    config: Any = None  # a transformers model's config; None for a user's module

    def __call__(self):
        return self.model(**self.inputs) if isinstance(self.inputs, dict) else self.model(*self.inputs)


# --- transformers models -------------------------------------------------------------------------------------


def transformers_config(name: str):
    """A preset, a local folder holding config.json, or a Hub id (read from the cache when offline): (config, tag,
    where it came from)."""
    transformers = _quiet_transformers()
    if name in PRESETS:
        preset = PRESETS[name]
        config = getattr(transformers, preset.config_class)(**preset.options)
        return config, name, f"preset {name}, {preset.what}"
    folder = Path(name).expanduser()
    if folder.is_dir():
        if not (folder / "config.json").is_file():
            raise UsageError(f"--model {name}: the folder holds no config.json (a transformers model folder does)")
        try:
            config = transformers.AutoConfig.from_pretrained(str(folder))
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise UsageError(f"--model {name}: its config.json does not load ({first_line(err)})") from None
        return config, _file_name_part(folder.resolve().name), f"the config in {folder.name}/"
    if not _HUB_ID.match(name):
        known = ", ".join(PRESETS)
        raise UsageError(f"--model {name}: not a preset ({known}), a local folder, or a Hub id (owner/name, e.g. "
                         "openai-community/gpt2)")
    try:
        config = transformers.AutoConfig.from_pretrained(name)
    except Exception as err:  # noqa: BLE001 - network, cache, access, a repo without a config: each one line
        raise _hub_error(name, "its config", err) from None
    return config, _file_name_part(name.replace("/", "--")), f"{name}'s config from the Hub (or its cache)"


def build_transformers(name: str, config, device: torch.device, dtype: torch.dtype, pretrained: bool) -> nn.Module:
    """`AutoModelForCausalLM` from the config (random weights) or, with `pretrained`, from the weights."""
    transformers = _quiet_transformers()
    dtype_option = {"dtype" if _transformers_version() >= (4, 56) else "torch_dtype": dtype}
    try:
        if pretrained:
            model = transformers.AutoModelForCausalLM.from_pretrained(name, config=config, **dtype_option)
            return model.to(device)
        with device:  # built where it runs: a 1 B model is initialised on the GPU in a blink, on a CPU in seconds
            return transformers.AutoModelForCausalLM.from_config(config, **dtype_option)
    except torch.OutOfMemoryError as err:
        raise CannotRunHere(f"out of memory building the model ({first_line(err)})") from None
    except ValueError as err:
        if "Unrecognized configuration class" in str(err):
            kind = type(config).__name__
            raise UsageError(f"--model {name}: {kind} has no causal language model in transformers (AutoModelForCausalLM)") from None
        raise
    except Exception as err:  # noqa: BLE001 - the weights: network, cache, access, each one line
        if pretrained:
            raise _hub_error(name, "its weights", err) from None
        raise


def token_inputs(config, batch: int, seq: int, device: torch.device, train: bool) -> dict:
    """Random token ids; as labels too when training, so that the model computes its own loss (shifted inside)."""
    limit = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    if limit is not None and seq > limit:
        raise UsageError(f"--seq {seq}: this model takes at most {limit} tokens per sequence")
    ids = torch.randint(0, config.vocab_size, (batch, seq), device=device)
    inputs = {"input_ids": ids, "use_cache": False}  # no KV cache: a training-shaped forward over the whole sequence
    if train:
        inputs["labels"] = ids
    return inputs


def _quiet_transformers():
    """transformers, its warnings off (on a successful run stderr stays empty) and its Hub downloads without bars."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import transformers
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)
    return transformers


def _transformers_version() -> tuple[int, ...]:
    import transformers

    return tuple(int(part) for part in re.findall(r"\d+", transformers.__version__)[:2])


def _hub_error(name: str, what: str, err: BaseException) -> Exception:
    """A Hub failure as one line: a repository that does not exist or is gated is the user's to fix (exit 2); no
    network and nothing cached cannot work here (exit 1)."""
    chain, seen = [], err
    while seen is not None and len(chain) < 8:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    kinds = {type(e).__name__ for e in chain}
    text = " ".join(str(e) for e in chain)
    if "GatedRepoError" in kinds or "gated" in text.lower():
        return UsageError(f"--model {name}: the repository is gated: accept its terms on the Hub, then `hf auth login`")
    if "RepositoryNotFoundError" in kinds or "is not a valid model identifier" in text:
        return UsageError(f"--model {name}: no such model on the Hub (nor a local folder of that name)")
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
    if offline or "offline" in text.lower() or "connect" in text.lower() or "resolve" in text.lower():
        why = "HF_HUB_OFFLINE is set" if offline else "the Hub cannot be reached"
        return CannotRunHere(f"--model {name}: {why}, and the Hugging Face cache does not hold {what}")
    return CannotRunHere(f"--model {name}: cannot load {what} ({first_line(err)})")


def _file_name_part(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "model"


# --- a module of the user's ----------------------------------------------------------------------------------


def load_factory(spec: str) -> tuple[Callable[[], Any], str]:
    """`path/to/file.py:factory` or `package.module:factory`: the factory, and its part of the trace's file name.

    A file is loaded from its path because the user named it (importlib.util.spec_from_file_location); a module name
    is imported as `python -m` would, from the current folder first."""
    where, colon, attribute = spec.rpartition(":")
    if not colon or not where or not attribute.isidentifier():
        raise UsageError(f"--module {spec}: expected FILE.py:FACTORY or PACKAGE.MODULE:FACTORY (a function's name after the colon)")
    if where.endswith(".py") or os.sep in where or "/" in where:
        path = Path(where).expanduser()
        if not path.is_file():
            raise UsageError(f"--module {spec}: no such file {where}")
        module_name = f"_profiled_{_file_name_part(path.stem).replace('-', '_').replace('.', '_')}"
        loader_spec = importlib.util.spec_from_file_location(module_name, path)
        if loader_spec is None or loader_spec.loader is None:
            raise UsageError(f"--module {spec}: {where} is not a Python file")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[module_name] = module  # dataclasses and pickling look their module up by name
        _run_user_code(lambda: loader_spec.loader.exec_module(module), f"loading {where}")
        tag = path.stem
    else:
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(where)
        except ModuleNotFoundError as err:
            if err.name and where.startswith(err.name):
                raise UsageError(f"--module {spec}: no module named {err.name}") from None
            raise UsageError(f"--module {spec}: importing {where} failed: {first_line(err)}") from None
        except Exception as err:  # noqa: BLE001 - the user's module: whatever it raises is one line
            raise UsageError(f"--module {spec}: importing {where} raised {type(err).__name__}: {first_line(err)}") from None
        tag = where
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise UsageError(f"--module {spec}: {where} has no function {attribute}")
    return factory, _file_name_part(f"{tag}.{attribute}")


def call_factory(factory: Callable[[], Any], spec: str) -> tuple[nn.Module, tuple | dict]:
    """Call the factory (no arguments) and check that it returned `(model, example_inputs)`."""
    made = _run_user_code(factory, f"{spec}()")
    if not (isinstance(made, (tuple, list)) and len(made) == 2):
        got = type(made).__name__
        raise UsageError(f"--module {spec}: the factory must return (model, example_inputs), a pair; it returned {got}")
    model, inputs = made
    if not isinstance(model, nn.Module):
        raise UsageError(f"--module {spec}: the factory's first value must be an nn.Module, not {type(model).__name__}")
    if isinstance(inputs, list):
        inputs = tuple(inputs)
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    if not isinstance(inputs, (tuple, dict)) or (isinstance(inputs, dict) and not all(isinstance(k, str) for k in inputs)):
        raise UsageError(
            f"--module {spec}: example_inputs must be a tuple of positional arguments or a dict of keyword arguments, "
            f"not {type(inputs).__name__}"
        )
    return model, inputs


def _run_user_code(call: Callable[[], Any], what: str) -> Any:
    try:
        return call()
    except torch.OutOfMemoryError as err:
        raise CannotRunHere(f"{what} ran out of memory ({first_line(err)})") from None
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as err:  # noqa: BLE001 - the user's code: whatever it raises is one line, not a traceback
        raise UsageError(f"{what} raised {type(err).__name__}: {first_line(err)}") from None


# --- both ----------------------------------------------------------------------------------------------------


def moved(value: Any, device: torch.device, dtype: torch.dtype) -> Any:
    """`value` with its tensors on `device`, its floating tensors in `dtype` (token ids and masks keep theirs)."""
    if isinstance(value, torch.Tensor):
        return value.to(device, dtype) if value.is_floating_point() else value.to(device)
    if isinstance(value, dict):
        return {key: moved(item, device, dtype) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(moved(item, device, dtype) for item in value)
    return value


def loss_of(output: Any) -> torch.Tensor:
    """The model's own loss where it returns one (a transformers model given labels), else the mean of its output
    (its first tensor when it returns several)."""
    loss = getattr(output, "loss", None)
    if loss is None and isinstance(output, dict):
        loss = output.get("loss")
    if isinstance(loss, torch.Tensor):
        return loss
    tensor = _first_tensor(output)
    if tensor is None or not tensor.is_floating_point():
        raise UsageError("--train: the model returns no loss and no floating-point tensor to take the mean of")
    return tensor.float().mean()


def _first_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    return next((t for t in (_first_tensor(item) for item in items) if t is not None), None)


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def training_bytes(model: nn.Module, dtype: torch.dtype, train: bool) -> int:
    """A floor for what a step holds besides activations: the weights, and when training their gradients and
    AdamW's two moments (each in the weights' dtype)."""
    return parameter_count(model) * dtype.itemsize * (4 if train else 1)
