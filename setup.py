"""Builds the optional native parse kernel; without a C compiler logetl falls back to pure Python."""
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("logetl._scan", ["src/logetl/_scan.c"], extra_compile_args=["-O3"], optional=True),
        # logetl's Parquet encoder of string columns (the local engine's fast path; pyarrow otherwise)
        Extension("logetl._parquet", ["src/logetl/_parquet.c"], extra_compile_args=["-O3"], optional=True),
    ]
)
