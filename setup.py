"""Builds the optional native parse kernel; without a C compiler logetl falls back to pure Python."""
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("logetl._scan", ["src/logetl/_scan.c"], extra_compile_args=["-O3"], optional=True),
    ]
)
