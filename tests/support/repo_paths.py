"""Where things are, for the tests and for the Python processes they start.

``tests/`` mirrors the package: ``writer/``, ``handlers/``, ``system/`` (whole-system runs) and the
package-wide tests at its root; the helpers (this module, ``readback``, ``synccount``, the scripts
that tests start by path) are in ``support/``. Test modules import helpers and each other by name
(``import readback``, ``from estimator_setup import make_est``): ``tests/conftest.py`` puts
``IMPORT_PATH`` on ``sys.path`` and in ``PYTHONPATH`` for the processes the tests start.
"""
from __future__ import annotations

import os

SUPPORT = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(SUPPORT)
ROOT = os.path.dirname(TESTS)
EXAMPLES = os.path.join(ROOT, "examples")


def _test_dirs() -> list[str]:
    """``tests/`` and each folder under it that holds a ``test_*.py``, in a fixed order."""
    dirs = []
    for d, subdirs, files in os.walk(TESTS):
        subdirs[:] = sorted(s for s in subdirs if not s.startswith((".", "_")))
        if d != SUPPORT and any(f.startswith("test_") and f.endswith(".py") for f in files):
            dirs.append(d)
    return dirs


# the helpers first, then every folder of tests; a basename is unique across them all
IMPORT_PATH = [SUPPORT, *_test_dirs()]
