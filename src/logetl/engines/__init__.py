"""Engines, looked up by name and imported only when used (the local path never imports pyspark)."""
from __future__ import annotations

import importlib

from logetl.engines.base import Engine, EngineUnavailable, UnsupportedOperator

#: name -> "module:class"
ENGINES = {
    "local": "logetl.engines.local:LocalEngine",
}

#: engines that are planned but not in this build, with the line a user sees
NOT_YET = {
    "spark": "the spark engine (--hdfs) is not available in this version of logetl yet; "
    "run without --hdfs to use the embedded local engine",
}


def get_engine(name: str) -> type[Engine]:
    if name in NOT_YET:
        raise EngineUnavailable(NOT_YET[name])
    if name not in ENGINES:
        raise EngineUnavailable(f"unknown engine {name!r} (choose from {', '.join(sorted(ENGINES))})")
    module, cls = ENGINES[name].split(":")
    return getattr(importlib.import_module(module), cls)


__all__ = ["ENGINES", "Engine", "EngineUnavailable", "UnsupportedOperator", "get_engine"]
