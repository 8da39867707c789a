"""The flags every lesson shares, checked so that bad input costs one line, not a traceback."""

from __future__ import annotations

import argparse
import re
import sys

from trace_report.errors import EXIT_USAGE

DTYPE_NAMES = ("bf16", "fp16", "fp32")


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but an error is one line on stderr (argparse prints the usage block first)."""

    def error(self, message: str):  # noqa: D401 - argparse API
        print(f"{self.prog}: error: {message} (see --help)", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _whole_number(text: str, least: int, what: str) -> int:
    # ASCII digits only: int() would also read "٨" (Arabic-Indic eight) or "1_000", which nobody types as a size.
    if not re.fullmatch(r"[+-]?[0-9]+", text.strip()):
        raise argparse.ArgumentTypeError(f"expected {what} (digits 0-9), got {text!r}")
    value = int(text)
    if value < least:
        raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
    return value


def positive_int(text: str) -> int:
    """A size: a whole number above zero."""
    return _whole_number(text, 1, "a positive whole number")


def positive_number(text: str) -> float:
    """An amount that need not be whole (megabytes, seconds): a decimal number above zero."""
    if not re.fullmatch(r"[+]?([0-9]+\.?[0-9]*|\.[0-9]+)", text.strip()) or float(text) <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number (0.5, 25), got {text!r}")
    return float(text)


def count_or_zero(text: str) -> int:
    """A count that may be 0 (what 0 means is the flag's to say)."""
    return _whole_number(text, 0, "a whole number, 0 or more")


def add_common_flags(parser: argparse.ArgumentParser, dtypes: tuple[str, ...] = DTYPE_NAMES) -> None:
    """`--compile`, `--dtype`, `--device`, `--trace_dir`: the post's flags plus the two that pick hardware."""
    parser.add_argument("--compile", action="store_true", help="wrap the forward in torch.compile (Inductor)")
    cpu_default = "fp32" if "fp32" in dtypes else dtypes[0]
    parser.add_argument(
        "--dtype",
        choices=dtypes,
        default=None,
        help=f"data type (default: bf16 on a GPU as in the post, {cpu_default} on CPU)",
    )
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default=None,
        help="where to run (default: cuda when a GPU is visible, else cpu)",
    )
    parser.add_argument(
        "--trace_dir",
        default="traces",
        help="folder for traces; each script writes into its own subfolder (default: traces)",
    )
