import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
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
