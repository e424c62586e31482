"""``python -m gluon_tb.as_mxboard (script.py | -m module) [args...]``: run code that imports mxboard
unchanged, with gluon_tb serving ``import mxboard`` (see :func:`gluon_tb.install_as_mxboard`)."""
from ._mxboard_alias import run_as_mxboard

if __name__ == "__main__":
    run_as_mxboard()
