"""``examples/profile_digits.py`` as a user runs it: a script of its own, offline, and what it wrote read
back (the XSpace by test_profile's wire decoder, the operator table by TensorBoard's reader, and, with
``GLUON_TB_XPROF_PYTHON``, the XSpace by XProf's own reader)."""
import collections
import glob
import json
import os
import re
import socket
import subprocess
import sys

import pytest

import repo_paths
from readback import multiplexer
from test_profile import decode_steps, decode_xspace, steps_of

EXAMPLE = os.path.join(repo_paths.EXAMPLES,
                       "profile_digits.py")
START, STOP = 10, 12  # the example's default profile_batch: 3 batches of epoch 0 (23 batches an epoch)
# its net, each once a batch: Conv2D, MaxPool2D, Flatten, Dense + relu, Dense
PER_BATCH = {"Convolution": 1, "Pooling": 1, "Flatten": 1, "FullyConnected": 2, "Activation": 2,
             "_backward_FullyConnected": 2, "_backward_Convolution": 1}


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """``(logdir, stdout, xplane file)`` of one run of the example, in a process of its own."""
    d = tmp_path_factory.mktemp("profile_example")
    logdir = str(d / "logs")
    env = dict(os.environ)
    env.pop("MXNET_PROFILER_AUTOSTART", None)
    proc = subprocess.run([sys.executable, EXAMPLE, "--logdir", logdir], cwd=str(d), env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    files = glob.glob(os.path.join(logdir, "train_batch", "plugins", "profile", "*", "*.xplane.pb"))
    assert len(files) == 1, files
    return logdir, proc.stdout, files[0]


def test_the_example_says_where_the_profile_is_and_how_to_open_it(example):
    logdir, out, xplane = example
    assert f"global batches {START} to {STOP}: {xplane}" in out
    assert "profile/operator_stats" in out
    assert "bash " in out and "install_xprof.sh" in out and "numpy" in out
    assert re.search(r"\.venv-xprof/bin/tensorboard --logdir " + re.escape(logdir) + "$", out, re.M)
    assert "Profile tab" in out


def test_its_xspace_holds_the_profiled_batches_operators(example):
    logdir, _, xplane = example
    session, name = xplane.split(os.sep)[-2:]
    assert re.fullmatch(r"\d{4}_\d\d_\d\d_\d\d_\d\d_\d\d", session)
    assert name == f"{socket.gethostname()}.xplane.pb"
    assert os.listdir(os.path.join(logdir, "train_batch", "plugins", "profile")) == [session]
    hosts, planes = decode_xspace(open(xplane, "rb").read())
    assert hosts == [socket.gethostname()] and [p["name"] for p in planes] == ["/host:CPU"]
    lines = planes[0]["lines"]
    assert sum(len(ln["events"]) for ln in lines) > 100
    # a process's first profile: its lines are named by MXNet's domains; and the steps' line
    # (no MXNET_C_API line: API calls are not profiled, _mxnet/profiler.py says why)
    assert {ln["name"].split(" / ")[0] for ln in lines} == {"cpu/0", "operator", "Training steps"}
    assert sorted(steps_of(decode_steps(open(xplane, "rb").read()))) == list(range(START, STOP + 1))
    def names(domain):
        return collections.Counter(e[0] for ln in lines if ln["name"].startswith(domain + " /")
                                   for e in ln["events"])

    want = {op: n * (STOP - START + 1) for op, n in PER_BATCH.items()}
    for domain in ("cpu/0", "operator"):  # each operator once on each
        seen = names(domain)
        assert {op: seen[op] for op in PER_BATCH} == want, domain


def test_its_operator_table_is_text_at_the_last_profiled_batch(example):
    logdir, _, _ = example
    mux = multiplexer(logdir)
    assert sorted(mux.Runs()) == ["train", "train_batch", "validation"]
    profile_tags = [t for t in mux.Runs()["train_batch"]["tensors"] if t.startswith("profile/")]
    assert profile_tags == ["profile/operator_stats"]
    [event] = mux.Tensors("train_batch", "profile/operator_stats")
    assert mux.SummaryMetadata("train_batch", "profile/operator_stats").plugin_data.plugin_name == "text"
    text = event.tensor_proto.string_val[0].decode()
    assert event.step == STOP
    assert text.startswith(f"MXNet profiler, global batches {START} to {STOP}\n")
    assert "**operator**" in text
    for op, n in PER_BATCH.items():
        assert re.search(rf"^\| {op} \| {n * (STOP - START + 1)} \|", text, re.M), op


def test_xprof_reads_its_xspace(example, xprof_python):
    """XProf's own reader (``xprof.profile_data``, in its venv) agrees with the decoder here."""
    _, _, xplane = example
    script = ("import collections, json, sys\nfrom xprof import profile_data as pd\n"
              "p = pd.ProfileData.from_file(sys.argv[1])\n"
              "print(json.dumps({pl.name: {ln.name: collections.Counter(e.name for e in ln.events)"
              " for ln in pl.lines} for pl in p.planes}))\n")
    out = subprocess.run([xprof_python, "-c", script, xplane], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    planes = json.loads(out.strip().splitlines()[-1])
    _, mine = decode_xspace(open(xplane, "rb").read())
    assert list(planes) == ["/host:CPU"]
    assert {name: dict(c) for name, c in planes["/host:CPU"].items()} == \
        {ln["name"]: dict(collections.Counter(e[0] for e in ln["events"])) for ln in mine[0]["lines"]}
