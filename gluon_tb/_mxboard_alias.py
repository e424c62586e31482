"""Serve ``import mxboard`` from gluon_tb, for code that is not yours to edit.

GluonCV (``gluoncv.utils.viz.plot_mxboard``) and Sockeye (``sockeye/training.py``) import
mxboard themselves, so their users cannot change the import. After :func:`install_as_mxboard`,
every later ``import mxboard``, ``from mxboard import SummaryWriter``,
``from mxboard.writer import SummaryWriter`` and ``from mxboard.utils import make_image_grid``
in the process gets gluon_tb's, whether or not mxboard is installed.

From the command line, the same for a script or module you run unchanged::

    python -m gluon_tb.as_mxboard train.py --epochs 3
    python -m gluon_tb.as_mxboard -m sockeye.train --source ...
"""
from __future__ import annotations

import os
import runpy
import sys
import types
import warnings
from typing import Any, Dict, List, Optional

from .writer import SummaryWriter, make_image_grid

# the names mxboard 0.1.0 (its last release) offers: the package, and the two modules its users
# import from; the rest of mxboard (summary, proto, event_file_writer) is private to it
_MODULES: Dict[str, Dict[str, Any]] = {
    "mxboard": {"SummaryWriter": SummaryWriter},
    "mxboard.writer": {"SummaryWriter": SummaryWriter},
    "mxboard.utils": {"make_image_grid": make_image_grid},
}
_MARK = "__gluon_tb_alias__"


def install_as_mxboard() -> types.ModuleType:
    """Make ``import mxboard`` give gluon_tb's :class:`SummaryWriter` from now on, in this process.

    Registers the modules ``mxboard``, ``mxboard.writer`` and ``mxboard.utils`` in
    ``sys.modules``. Code that imports mxboard later, even inside a function (GluonCV's
    ``plot_mxboard``) or under ``try: import mxboard`` (Sockeye), runs unchanged and writes with
    gluon_tb. Calling it again does nothing. If the real mxboard was imported already, it is
    replaced with a warning: modules that imported it before keep the real one.

    Returns:
        The ``mxboard`` module now in ``sys.modules``.

    Example::

        import gluon_tb
        gluon_tb.install_as_mxboard()

        import mxboard                      # GluonCV and Sockeye do this themselves
        with mxboard.SummaryWriter(logdir="logs/alias") as sw:
            sw.add_scalar("loss", 0.5, global_step=1)
    """
    current = sys.modules.get("mxboard")
    if current is not None and getattr(current, _MARK, False):
        return current
    if current is not None:
        warnings.warn(
            "install_as_mxboard: the real mxboard was already imported; it is replaced from now on, but "
            "modules that imported it before keep it (call install_as_mxboard() before anything imports mxboard)",
            RuntimeWarning, stacklevel=2)
    modules = {}
    for name, attrs in _MODULES.items():
        mod = types.ModuleType(name, "mxboard's API, served by gluon_tb (gluon_tb.install_as_mxboard).")
        mod.__dict__.update(attrs, __all__=sorted(attrs))
        mod.__dict__[_MARK] = True
        modules[name] = mod
    top = modules["mxboard"]
    top.__dict__.update(
        __path__=[],  # a package: ``import mxboard.writer`` finds its submodules
        __version__="0.1.0",  # the mxboard release whose API this serves
        writer=modules["mxboard.writer"], utils=modules["mxboard.utils"])
    for name in list(sys.modules):  # the real mxboard's submodules, if it was imported
        if name.startswith("mxboard."):
            del sys.modules[name]
    sys.modules.update(modules)
    return top


def run_as_mxboard(argv: Optional[List[str]] = None) -> None:
    """``python -m gluon_tb.as_mxboard script.py args...`` or ``... -m module args...``: runs the
    script or module as ``__main__`` after :func:`install_as_mxboard`. ``argv`` defaults to ``sys.argv[1:]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    usage = "usage: python -m gluon_tb.as_mxboard (script.py | -m module) [args...]"
    if not args or args[0] in ("-h", "--help") or (args[0] == "-m" and len(args) < 2):
        print(usage, file=sys.stderr if not args or args[0] == "-m" else sys.stdout)
        raise SystemExit(0 if args and args[0] in ("-h", "--help") else 2)
    install_as_mxboard()
    if args[0] == "-m":
        sys.argv = [args[1]] + args[2:]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = args
        sys.path.insert(0, os.path.dirname(os.path.abspath(args[0])))  # as ``python script.py`` does
        runpy.run_path(args[0], run_name="__main__")
