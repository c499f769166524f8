"""Builds the optional native parse kernel; without a C compiler logetl falls back to pure Python."""
from setuptools import Extension, setup

setup(
    ext_modules=[
        # (the scanners are in _kernel.h, shared with the JVM's kernel: spark_jvm builds that one on demand)
        Extension("logetl._scan", ["src/logetl/_scan.c"], depends=["src/logetl/_kernel.h", "src/logetl/_json.h"], extra_compile_args=["-O3"],
                  optional=True),
        # logetl's Parquet encoder of string columns (the local engine's fast path; pyarrow otherwise)
        Extension("logetl._parquet", ["src/logetl/_parquet.c"], extra_compile_args=["-O3"], optional=True),
    ]
)
