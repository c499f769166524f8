"""The local engine, by concern: the engine itself (``engine``), the expressions' compiler to Polars
(``expressions``) and the memory budget with its spill files (``spill``).

Importing the package imports none of them; ``LocalEngine`` is loaded when first asked for.
"""
from __future__ import annotations


def __getattr__(name: str):
    if name == "LocalEngine":
        from logetl.engines.local.engine import LocalEngine
        return LocalEngine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
