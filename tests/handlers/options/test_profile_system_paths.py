"""``profile_batch`` never touches a file outside the log directory and its own temporary folder.

MXNet's ``profiler.set_config`` unlinks the file it is given, and after the profiler has run, MXNet
writes its trace into the configured file once more when the process exits. Handed ``os.devnull``
as root, that removed ``/dev/null`` and left a regular file in its place. Every profiler path runs
here in a child process (as whoever runs the tests: root in CI) with its own working directory and
``TMPDIR``; afterwards ``/dev/null`` must still be a character device, the working directory must
hold only the log directory, ``TMPDIR`` must be empty, and every file handed to ``set_config`` must
have been inside ``TMPDIR``.
"""
import json
import os
import stat
import subprocess
import sys

CHILD = r'''
import json, os, sys, warnings
sys.path.insert(0, sys.argv[1])
import mxnet as mx
warnings.filterwarnings("ignore")
given = []
real = mx.profiler.set_config
def spy(**kw):
    if "filename" in kw:
        given.append(os.path.abspath(kw["filename"]))
    return real(**kw)
mx.profiler.set_config = spy

import test_profile as tp
import test_module_profile as tm
from gluon_tb.handlers import TensorBoardCallback, TensorBoardHandler

tp.profiled("logs/range", (1, 2))                      # a range inside the fit
tp.profiled("logs/past_end", (3, 100), epochs=1)       # a range past the end of the fit

class Boom(Exception):
    pass

class RaiseAt:                                         # the fit raises while the profiler runs
    priority = 0
    def batch_end(self, estimator, *a, **k):
        raise Boom()
from mxnet.gluon.contrib.estimator.event_handler import BatchEnd
class RaiseAtBatch(RaiseAt, BatchEnd):
    pass
est = tp.make_estimator()
try:
    est.fit(tp.loader(), epochs=1, event_handlers=[TensorBoardHandler("logs/raised", profile_batch=(0, 3)),
                                                    RaiseAtBatch()])
except Boom:
    pass

real_dumps = mx.profiler.dumps                         # the profiler itself fails (on_error="warn")
def broken(*a, **k):
    raise RuntimeError("dumps failed")
mx.profiler.dumps = broken
est = tp.make_estimator()
est.fit(tp.loader(), epochs=1, event_handlers=[TensorBoardHandler("logs/failed", profile_batch=1, on_error="warn")])
mx.profiler.dumps = real_dumps

cb = TensorBoardCallback("logs/module", profile_batch=(1, 2))   # Module.fit
tm.fit(cb)
json.dump(given, open(sys.argv[2], "w"))
'''


def is_char_device(path):
    return stat.S_ISCHR(os.stat(path).st_mode)


def test_every_profiler_path_leaves_system_files_and_the_working_directory_alone(tmp_path):
    work, tmp = tmp_path / "work", tmp_path / "tmp"
    work.mkdir()
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp))
    env.pop("MXNET_PROFILER_AUTOSTART", None)
    given_file = tmp_path / "given.json"
    assert is_char_device(os.devnull)
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD, os.path.dirname(__file__), str(given_file)],
                              cwd=str(work), env=env, timeout=300, capture_output=True, text=True)
    finally:
        broken = not is_char_device(os.devnull)
        if broken and os.geteuid() == 0:  # put the machine right before failing
            os.remove(os.devnull)
            os.mknod(os.devnull, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
            os.chmod(os.devnull, 0o666)
    assert not broken, "a profiler path replaced /dev/null (repaired by this test)"
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(os.listdir(work)) == ["logs"]
    assert sorted(os.listdir(work / "logs")) == ["failed", "module", "past_end", "range"]  # "raised" failed before it logged
    assert os.listdir(tmp) == []  # the private folder went at exit, before MXNet's exit-time write
    given = json.loads(given_file.read_text())
    assert given, "set_config was never given a file"
    assert all(os.path.commonpath([f, str(tmp)]) == str(tmp) for f in given), given
    for run in ("range", "past_end", "module"):  # each profiled and wrote its trace
        found = [f for _, _, fs in os.walk(work / "logs" / run) for f in fs if f.endswith(".xplane.pb")]
        assert len(found) == 1, (run, found)
