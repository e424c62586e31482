"""Only the optional C kernel of the histograms; everything else is in pyproject.toml.

The kernel is optional: where it cannot be compiled the package installs anyway and
gluon_tb counts histograms with numpy (same results, about 5x slower).
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension("gluon_tb.writer._fasthist", ["gluon_tb/writer/_fasthist.c"],
                             extra_compile_args=["-O3"], optional=True)])
