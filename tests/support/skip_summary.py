"""The last lines of a test run name what did not run, and why.

A run that ends "1283 passed, 2 skipped" looks green while a whole file of browser tests never
ran, and the set-up step that failed to install Chromium said so once, mid-output. So after
everything else pytest prints, a block lists:

* each set-up step of ``scripts/test.sh`` that failed: the install scripts append one line each
  to the file named by ``GLUON_TB_SETUP_NOTES`` (test.sh sets it), and
* each skipped test or module, grouped by file and reason, with how many.

Nothing is printed when every test ran and no set-up step failed. ``tests/conftest.py`` imports
the hook; ``tests/support/test_skip_summary.py`` runs it on a small suite.
"""
from __future__ import annotations

import collections
import os
from typing import List, Tuple

NOTES_ENV = "GLUON_TB_SETUP_NOTES"


def setup_notes() -> List[str]:
    """The lines the set-up steps wrote into ``$GLUON_TB_SETUP_NOTES`` (none when unset or missing)."""
    path = os.environ.get(NOTES_ENV, "")
    if not path or not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def _where_and_why(report) -> Tuple[str, str]:
    file, _, rest = report.nodeid.partition("::")
    where = file if rest else f"{file} (the whole file)"
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return where, reason.removeprefix("Skipped: ")


def pytest_unconfigure(config) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    skipped = [r for r in reporter.stats.get("skipped", []) if getattr(r, "nodeid", None) is not None]
    notes = setup_notes()
    if not skipped and not notes:
        return
    groups = collections.Counter(_where_and_why(r) for r in skipped)
    title = f"NOT RUN: {len(skipped)} skipped" + (f", {len(notes)} set-up step(s) failed" if notes else "")
    reporter.write_sep("=", title, yellow=True, bold=True)
    for note in notes:
        reporter.write_line(f"set-up failed: {note}")
    for (where, reason), n in sorted(groups.items()):
        reporter.write_line(f"{where}: {n} skipped: {reason}")
    reporter.write_line("The tests named above did not run: a pass does not cover them.")
