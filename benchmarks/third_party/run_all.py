"""Runs every third-party case, each in its own process, and prints their comparison reports.

Usage: python run_all.py <mxnet git dir> <gluon-nlp git dir>
       (from the ``fetch`` tool: /work/.mirror/apache+mxnet/repo and /work/.mirror/dmlc+gluon-nlp/repo)
Exit status 1 when any case has a FAIL row or raised. A case's full output: /tmp/tp/third_party/<case>.log.
"""
from __future__ import annotations

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRATCH = os.environ.get("TP_SCRATCH", "/tmp/tp/third_party")


def main(mxnet_git: str, nlp_git: str) -> int:
    os.makedirs(SCRATCH, exist_ok=True)
    cases = [("case_mxnet_estimator_tests.py", mxnet_git), ("case_mxnet_module_mnist.py", mxnet_git),
             ("case_gluonnlp_lm_estimator.py", nlp_git)]
    worst = 0
    for script, src in cases:
        log = os.path.join(SCRATCH, script.replace(".py", ".log"))
        with open(log, "w") as f:
            rc = subprocess.call(["nice", "-n", "10", sys.executable, os.path.join(HERE, script), src],
                                 stdout=f, stderr=subprocess.STDOUT)
        with open(log) as f:
            lines = f.read().splitlines()
        # the report: from the first "=== " line, the case's own rows and its summary (not the training's prints)
        start = next((i for i, l in enumerate(lines) if l.startswith("=== ")), len(lines))
        keep = [l for l in lines[start:] if l.startswith(("=== ", "  PASS", "  FAIL", "  INFO", "TEST RAISED",
                                                          "SCRIPT RAISED", "Traceback", "  File", "    "))
                or " compared, " in l]
        print(f"\n######## {script} (exit {rc}; full output {log})")
        print("\n".join(keep))
        worst = max(worst, 1 if rc else 0)
    return worst


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
