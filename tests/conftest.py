import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
# the helpers (tests/support) and every folder of tests, importable by name here and in every Python
# process a test starts (tests/support/repo_paths.py); the repository root first, as before
sys.path.insert(0, os.path.join(HERE, "support"))
from repo_paths import IMPORT_PATH  # noqa: E402

sys.path[:0] = [os.path.dirname(HERE)] + [d for d in IMPORT_PATH if d not in sys.path]
os.environ["PYTHONPATH"] = os.pathsep.join(IMPORT_PATH + [p for p in [os.environ.get("PYTHONPATH", "")] if p])
os.environ.setdefault("MXNET_SUBGRAPH_VERBOSE", "0")

from skip_summary import pytest_unconfigure  # noqa: E402,F401  (the NOT RUN block at the end)


@pytest.fixture(scope="session")
def xprof_python() -> str:
    """The python of a venv with XProf (``GLUON_TB_XPROF_PYTHON``; scripts/test.sh makes .venv-xprof).

    Without it the test is skipped, or fails under ``GLUON_TB_REQUIRE_XPROF=1`` (CI)."""
    path = os.environ.get("GLUON_TB_XPROF_PYTHON", "")
    if not path:
        missing = "GLUON_TB_XPROF_PYTHON (a venv with xprof, scripts/install_xprof.sh) is not set"
    elif not os.access(path, os.X_OK):
        missing = f"GLUON_TB_XPROF_PYTHON={path} is not an executable (scripts/install_xprof.sh makes it)"
    elif subprocess.run([path, "-c", "import xprof.profile_data"], capture_output=True, timeout=60).returncode:
        missing = f"GLUON_TB_XPROF_PYTHON={path} cannot import xprof.profile_data (scripts/install_xprof.sh)"
    else:
        return path
    if os.environ.get("GLUON_TB_REQUIRE_XPROF") == "1":
        pytest.fail(f"GLUON_TB_REQUIRE_XPROF=1 but {missing}", pytrace=False)
    pytest.skip(missing)


@pytest.fixture(autouse=True)
def dev_null_stays_a_device():
    """Fails the test after which ``/dev/null`` is no longer a character device (as root, a library
    handed ``os.devnull`` can delete it and leave a regular file), and puts it back first."""
    import stat

    yield
    try:
        broken = not stat.S_ISCHR(os.stat(os.devnull).st_mode)
    except FileNotFoundError:
        broken = True
    if broken:
        if os.geteuid() == 0:
            if os.path.lexists(os.devnull):
                os.remove(os.devnull)
            os.mknod(os.devnull, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
            os.chmod(os.devnull, 0o666)
        pytest.fail("/dev/null is no longer a character device after this test (repaired when root)")


@pytest.fixture
def mount_tmpfs(tmp_path):
    """``mount_tmpfs(size)``: a tmpfs of ``size`` (``"64k"``) mounted under ``tmp_path``, unmounted
    afterwards; the test is skipped where mounting is not allowed (not root)."""
    mounted = []

    def mount(size):
        mnt = tmp_path / f"tmpfs{len(mounted)}"
        mnt.mkdir()
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
        mounted.append(mnt)
        return mnt

    yield mount
    for mnt in mounted:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
