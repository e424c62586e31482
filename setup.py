"""Only the optional C kernels; everything else is in pyproject.toml.

All are optional: where they cannot be compiled the package installs anyway, and gluon_tb
counts histograms, converts pixels and audio samples with numpy, frames records and writes
whole files in Python (same results, slower). ``-ffp-contract=off``: no fused multiply-adds, so float arithmetic
rounds where numpy's does.
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension(f"gluon_tb.writer.{pkg}.{name}", [f"gluon_tb/writer/{pkg}/{name}.c"],
                             extra_compile_args=["-O3", "-ffp-contract=off"], optional=True, libraries=libs,
                             depends=(["gluon_tb/writer/_summaries/_pixels.h"] if pkg == "_summaries" else [])
                             + ["gluon_tb/writer/_format/_fill.h"])
                   for pkg, name, libs in (("_summaries", "_fasthist", []), ("_summaries", "_fastconvert", []),
                                           ("_summaries", "_fastpng", ["z"]),  # zlib: where its header is missing,
                                           ("_format", "_fastframe", []),      # Pillow encodes PNG
                                           ("_io", "_fastio", []))])
