"""``import mxboard`` served by gluon_tb, for code that is not yours to edit.

GluonCV's ``gluoncv.utils.viz.plot_mxboard`` does ``from mxboard import SummaryWriter`` inside the
function and logs a symbol's graph; Sockeye's ``training.py`` does ``import mxboard`` under
``try`` and ``mxboard.SummaryWriter(logdir=..., flush_secs=60, verbose=False)``, then logs scalars
and never closes the writer. Each is run here in a process of its own, as that code is written
(mxboard itself is not installed), and what it wrote is read back with TensorBoard's reader.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import pytest

import gluon_tb
import readback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Sockeye's way (sockeye/training.py), unchanged: the script never names gluon_tb
SOCKEYE_LIKE = """
import sys
try:
    import mxboard
except ImportError:
    sys.exit("mxboard not found")
sw = mxboard.SummaryWriter(logdir=sys.argv[1], flush_secs=60, verbose=False)
for step, value in enumerate([2.5, 1.25, 0.75]):
    sw.add_scalar(tag="train-perplexity", value=value, global_step=step + 1)
# Sockeye never closes its writer: the values must still be on disk at exit
"""

# GluonCV's plot_mxboard, as a library function the user cannot edit
GLUONCV_LIKE = """
import mxnet as mx

def plot_mxboard(block, logdir='./logs'):
    try:
        from mxboard import SummaryWriter
    except ImportError:
        print('mxboard is required.')
        raise
    data = mx.sym.var('data')
    sym = block(data)
    if isinstance(sym, tuple):
        sym = mx.sym.Group(sym)
    with SummaryWriter(logdir=logdir) as sw:
        sw.add_graph(sym)
"""


def run(args, cwd, extra_path=""):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (extra_path, ROOT) if p))
    proc = subprocess.run([sys.executable, *args], cwd=str(cwd), env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc


def test_mxboard_is_not_installed_here():
    """The tests below would prove nothing if the real mxboard answered the import."""
    proc = subprocess.run([sys.executable, "-c", "import mxboard"], capture_output=True, text=True)
    assert "No module named 'mxboard'" in proc.stderr


def test_a_script_run_through_the_command_line_entry(tmp_path):
    (tmp_path / "train.py").write_text(SOCKEYE_LIKE)
    logdir = str(tmp_path / "logs")
    run(["-m", "gluon_tb.as_mxboard", "train.py", logdir], tmp_path)
    assert readback.tags(logdir) == {(".", "train-perplexity")}
    assert readback.scalars(logdir, ".", "train-perplexity") == [(1, 2.5), (2, 1.25), (3, 0.75)]


def test_a_module_run_with_dash_m(tmp_path):
    pkg = tmp_path / "src" / "fakesockeye"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "train.py").write_text(SOCKEYE_LIKE)
    logdir = str(tmp_path / "logs")
    run(["-m", "gluon_tb.as_mxboard", "-m", "fakesockeye.train", logdir], tmp_path, str(tmp_path / "src"))
    assert readback.scalars(logdir, ".", "train-perplexity") == [(1, 2.5), (2, 1.25), (3, 0.75)]


def test_a_library_that_imports_mxboard_inside_a_function(tmp_path):
    pytest.importorskip("mxnet")
    (tmp_path / "fakegluoncv.py").write_text(GLUONCV_LIKE)
    main = textwrap.dedent("""
        import gluon_tb
        gluon_tb.install_as_mxboard()

        from mxnet.gluon import nn
        import fakegluoncv
        net = nn.HybridSequential(prefix="net_")
        with net.name_scope():
            net.add(nn.Dense(4, activation="relu"), nn.Dense(2))
        net.initialize()
        fakegluoncv.plot_mxboard(net, logdir="logs")
    """)
    (tmp_path / "main.py").write_text(main)
    run(["main.py"], tmp_path, str(tmp_path))
    graph = readback.multiplexer(str(tmp_path / "logs")).Graph(".")
    ops = sorted(n.op for n in graph.node)
    assert ops.count("FullyConnected") == 2 and ops.count("Activation") == 1
    names = {n.name for n in graph.node}
    assert {"data", "net/dense0/weight", "net/dense0/bias", "net/dense1/weight", "net/dense1/bias"} <= names


@pytest.fixture
def clean_modules():
    saved = {k: v for k, v in sys.modules.items() if k == "mxboard" or k.startswith("mxboard.")}
    for k in saved:
        del sys.modules[k]
    yield
    for k in [k for k in sys.modules if k == "mxboard" or k.startswith("mxboard.")]:
        del sys.modules[k]
    sys.modules.update(saved)


def test_every_documented_import_gets_gluon_tb(clean_modules):
    mod = gluon_tb.install_as_mxboard()
    import mxboard
    import mxboard.writer
    from mxboard import SummaryWriter
    from mxboard.utils import make_image_grid
    from mxboard.writer import SummaryWriter as WriterSummaryWriter

    assert mxboard is mod and mxboard.writer is sys.modules["mxboard.writer"]
    assert SummaryWriter is WriterSummaryWriter is gluon_tb.SummaryWriter
    assert make_image_grid is gluon_tb.make_image_grid
    assert mxboard.__all__ == ["SummaryWriter"] and mxboard.__version__ == "0.1.0"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert gluon_tb.install_as_mxboard() is mod  # a second call: the same module, no warning


def test_a_real_mxboard_imported_before_is_replaced_with_a_warning(clean_modules):
    import types

    real = types.ModuleType("mxboard")
    sys.modules["mxboard"] = real
    sys.modules["mxboard.summary"] = types.ModuleType("mxboard.summary")
    with pytest.warns(RuntimeWarning, match="already imported.*keep it"):
        mod = gluon_tb.install_as_mxboard()
    assert sys.modules["mxboard"] is mod is not real
    assert "mxboard.summary" not in sys.modules


def test_the_entry_without_arguments_prints_its_usage(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-m", "gluon_tb.as_mxboard"], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "usage: python -m gluon_tb.as_mxboard (script.py | -m module) [args...]" in proc.stderr
