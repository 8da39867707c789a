"""Collectives nothing overlaps: a data-parallel rank's all-reduces, all-gathers and reduce-scatters run with no
compute beside them."""

from __future__ import annotations

RULES = ()
