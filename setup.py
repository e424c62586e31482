"""Only the optional C kernels; everything else is in pyproject.toml.

Both are optional: where they cannot be compiled the package installs anyway, and
gluon_tb counts histograms with numpy and frames records in Python (same results, slower).
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension(f"gluon_tb.writer.{pkg}.{name}", [f"gluon_tb/writer/{pkg}/{name}.c"],
                             extra_compile_args=["-O3"], optional=True)
                   for pkg, name in (("_summaries", "_fasthist"), ("_format", "_fastframe"))])
