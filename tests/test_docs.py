"""Every ``python`` code block of README.md and docs/*.md runs.

Each block runs in a process of its own, in a temporary directory, after
``from docs_prelude import *`` (tests/support/docs_prelude.py: a small net, an Estimator, a Module and
their data). A block that needs what a test machine lacks follows a line
``<!-- no-run: reason -->``; the reason must be given, and such blocks stay few. The README stays
short, links every docs page, and every relative link of the docs points at a file that exists.
"""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
from typing import List, NamedTuple, Optional

import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
NO_RUN = re.compile(r"^<!--\s*no-run:(.*?)-->\s*$")
FENCE = re.compile(r"^```(\S*)\s*$")
MAX_NO_RUN = 6


class Block(NamedTuple):
    page: pathlib.Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    no_run: Optional[str]  # the marker's reason ('' when it names none), None without a marker

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks_of(page: pathlib.Path, text: Optional[str] = None) -> List[Block]:
    lines = (page.read_text() if text is None else text).splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, lang = i, m.group(1)
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        prev = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
        marker = NO_RUN.match(prev.strip())
        out.append(Block(page, start + 1, lang, "\n".join(lines[start + 1:j]) + "\n",
                         marker.group(1).strip() if marker else None))
        i = j + 1
    return out


ALL = [b for p in PAGES for b in blocks_of(p)]
PYTHON = [b for b in ALL if b.lang == "python"]


def test_the_pages_have_python_blocks():
    assert len(PYTHON) >= 15 and {b.page.name for b in PYTHON} >= {"README.md", "estimator.md", "mxboard.md"}


@pytest.mark.parametrize("block", [b for b in PYTHON if b.no_run is None], ids=lambda b: b.id)
def test_block_runs(block, tmp_path):
    script = tmp_path / "block.py"
    script.write_text("from docs_prelude import *  # noqa: F401,F403\n" + block.code)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE / "support"), str(ROOT)]), MPLBACKEND="Agg")
    env.pop("MXNET_PROFILER_AUTOSTART", None)
    proc = subprocess.run([sys.executable, str(script)], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{block.id} failed:\n{block.code}\n{proc.stdout[-2000:]}{proc.stderr[-3000:]}"


def test_no_run_markers_name_a_reason_and_stay_few():
    marked = [b for b in ALL if b.no_run is not None]
    assert [b.id for b in marked if len(b.no_run) < 10] == []  # a reason, not a bare marker
    assert [b.id for b in marked if b.lang != "python"] == []  # a marker before a non-python block does nothing
    assert len(marked) <= MAX_NO_RUN, [b.id for b in marked]
    # every marker in the pages sits right before a block (a stray one would silently mark nothing)
    for page in PAGES:
        n_markers = sum(bool(NO_RUN.match(ln.strip())) for ln in page.read_text().splitlines())
        assert n_markers == sum(b.no_run is not None for b in blocks_of(page)), page


def test_the_extractor_reads_markers_and_fences():
    text = ("# t\n\n<!-- no-run: needs a GPU here -->\n```python\nimport x\n```\n\n"
            "```python\nprint(1)\nprint(2)\n```\n\n<!-- no-run: -->\n```python\nraise SystemExit(1)\n```\n"
            "```bash\nls\n```\n")
    got = [(b.line, b.lang, b.code, b.no_run) for b in blocks_of(ROOT / "x.md", text)]
    assert got == [(4, "python", "import x\n", "needs a GPU here"), (8, "python", "print(1)\nprint(2)\n", None),
                   (14, "python", "raise SystemExit(1)\n", ""), (17, "bash", "ls\n", None)]


def test_readme_is_short_and_links_every_docs_page():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    linked = set(re.findall(r"\(docs/([\w-]+\.md)", readme))
    assert linked == {p.name for p in (ROOT / "docs").glob("*.md")}


def test_readme_first_screen_has_install_use_and_the_two_commands():
    first = "\n".join((ROOT / "README.md").read_text().splitlines()[:70])
    for needed in ('pip install ".[mxnet,fast,board]"', "TensorBoardHandler(", "TensorBoardCallback(",
                   "bash scripts/demo.sh", "bash scripts/test.sh", ".venv/bin/tensorboard --logdir logs/digits",
                   "gluon_tb.autolog("):
        assert needed in first, needed


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_at_files(page):
    text = page.read_text()
    missing = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        if not path.exists():
            missing.append(target)
    assert missing == []
