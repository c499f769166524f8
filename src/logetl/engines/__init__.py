"""Engines, looked up by name and imported only when used (the local path never imports pyspark)."""
from __future__ import annotations

import importlib

from logetl.engines.base import Engine, EngineUnavailable, UnsupportedOperator

#: name -> "module:class"
ENGINES = {
    "local": "logetl.engines.local:LocalEngine",
    "spark": "logetl.engines.spark:SparkEngine",
}


def get_engine(name: str) -> type[Engine]:
    if name not in ENGINES:
        raise EngineUnavailable(f"unknown engine {name!r} (choose from {', '.join(sorted(ENGINES))})")
    module, cls = ENGINES[name].split(":")
    return getattr(importlib.import_module(module), cls)


__all__ = ["ENGINES", "Engine", "EngineUnavailable", "UnsupportedOperator", "get_engine"]
