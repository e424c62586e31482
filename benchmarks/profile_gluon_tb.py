"""cProfile of gluon_tb in a benchmark, on both threads (caller and writer worker).

    benchmarks/.venv/bin/python benchmarks/profile_gluon_tb.py scalar [n=200000]
    benchmarks/.venv/bin/python benchmarks/profile_gluon_tb.py mlp [batches=200]

The worker thread's ``Worker.run`` is wrapped (in this process only) so that it runs under
its own profiler; both profiles are printed, sorted by internal time. For a sampling view of
every thread (MXNet's engine included): ``py-spy record -o out.svg -- python _worker.py ...``.
"""
from __future__ import annotations

import cProfile
import os
import pstats
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gluon_tb.writer._io import worker as _io_worker  # noqa: E402

_worker_prof = cProfile.Profile()
_orig_run = _io_worker.Worker.run  # the writer thread's loop


def _profiled_run(self):  # type: ignore[no-untyped-def]
    _worker_prof.enable()
    try:
        return _orig_run(self)
    finally:
        _worker_prof.disable()


_io_worker.Worker.run = _profiled_run


def main() -> None:
    import _worker

    bench = sys.argv[1]
    kw = {k: int(v) for k, v in (a.split("=", 1) for a in sys.argv[2:])}
    logdir = tempfile.mkdtemp(prefix="gtb-prof-")
    caller = cProfile.Profile()
    caller.enable()
    try:
        res = _worker.BENCHES[bench]("gluon_tb", logdir, **kw)
    finally:
        caller.disable()
        shutil.rmtree(logdir, ignore_errors=True)  # the event files are not what is measured
    print("RESULT", res)
    for name, prof in (("caller thread", caller), ("writer thread", _worker_prof)):
        print(f"\n==== {name}")
        pstats.Stats(prof).sort_stats("tottime").print_stats(14)


if __name__ == "__main__":
    main()
