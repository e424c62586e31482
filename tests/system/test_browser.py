"""What a person sees: each dashboard of a real TensorBoard, opened in headless Chromium.

The graph and projector dashboards parse our files in JavaScript, so the HTTP API can pass while
the page is broken; these tests look at the rendered page. The log directory is what the Estimator
example writes (runs ``train`` and ``validation``) plus a run ``extras`` with the summary types the
example does not log (text, audio, PR curve, a projector embedding of the digits). The word-vector test
has a log directory and a TensorBoard of its own: what ``examples/word_embeddings_gluonnlp.py`` writes.

Needs Debian's ``chromium`` (``scripts/install_browser.sh``) and the ``playwright`` package; its own
browser download is not used. Without them the tests are skipped, unless ``GLUON_TB_REQUIRE_BROWSER=1``
(CI), where a missing browser is a failure. Screenshots go to pytest's temporary directory, or to
``$GLUON_TB_SCREENSHOTS`` when set (``GLUON_TB_SCREENSHOTS=docs/screenshots`` refreshes the README's).
"""
import contextlib
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

from tb_server import tensorboard

pytestmark = pytest.mark.browser

from repo_paths import ROOT  # noqa: E402
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic"]
TIMEOUT_MS = 20_000  # any one wait in the page
VIEWPORT = {"width": 1280, "height": 800}
# What TensorBoard's pages say when a dashboard has nothing to show or a request failed.
ERROR_TEXT = re.compile(r"No \w+ data was found|Data could not be loaded|No dashboards are active"
                        r"|No graph definition files|\berror\b|\bfailed\b", re.IGNORECASE)
LAYERS = ["conv0", "pool0", "conv1", "pool1", "flatten0", "dense0", "dense1"]  # the example's net
EMBEDDED = 200  # digits in the projector
EPOCHS = 2
WORDS = 500  # word vectors in the projector
SAMPLES = 150  # held-out digits embedded by the handler's embeddings= option


def _missing_browser() -> str:
    if not os.access(CHROMIUM, os.X_OK):
        return f"{CHROMIUM} not found (install it with scripts/install_browser.sh)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install playwright)"
    return ""


_MISSING = _missing_browser()
if _MISSING:
    if os.environ.get("GLUON_TB_REQUIRE_BROWSER") == "1":
        raise RuntimeError(f"GLUON_TB_REQUIRE_BROWSER=1 but {_MISSING}")
    pytest.skip(_MISSING, allow_module_level=True)

from playwright.sync_api import expect, sync_playwright  # noqa: E402

expect.set_options(timeout=TIMEOUT_MS)


# ------------------------------------------------------------------ the log directory
def _write_extras(run_dir: str) -> None:
    """Text, audio, a PR curve and an embedding of real digits (labels and thumbnails)."""
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    try:
        from _digits import load_digits
    finally:
        sys.path.remove(os.path.join(ROOT, "examples"))
    from gluon_tb import SummaryWriter

    images, labels = load_digits()
    images, labels = images[:EMBEDDED], labels[:EMBEDDED]
    rng = np.random.RandomState(0)
    t = np.arange(8000, dtype=np.float32) / 8000
    with SummaryWriter(run_dir) as w:
        w.add_text("notes", "## Digits run\n\nA **bold** note with a [link](https://mxnet.apache.org).", 1)
        w.add_audio("tone", 0.5 * np.sin(2 * np.pi * 440 * t), 8000, 1)
        w.add_pr_curve("is_zero", (labels == 0).astype(int),
                       np.clip((labels == 0) * 0.6 + rng.rand(EMBEDDED) * 0.5, 0, 1), 21, 1)
        w.add_embedding("digits", images.reshape(EMBEDDED, -1), labels=[str(x) for x in labels],
                        images=images, global_step=1)


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("browser_logs"))
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "estimator_digits.py"),
                           "--logdir", d, "--epochs", str(EPOCHS)],
                          cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    _write_extras(os.path.join(d, "extras"))
    return d


@pytest.fixture(scope="module")
def tb(logdir):
    with tensorboard(logdir, timeout=60) as server:
        yield server


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=30_000)
        yield b
        b.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    d = os.environ.get("GLUON_TB_SCREENSHOTS") or str(tmp_path_factory.mktemp("screenshots"))
    os.makedirs(d, exist_ok=True)
    return d


class Problems:
    """Uncaught page exceptions and failed requests to TensorBoard, collected while a test runs."""

    def __init__(self, page, base: str) -> None:
        self.seen = []
        page.on("pageerror", lambda e: self.seen.append(f"page error: {e}"))
        page.on("response", lambda r: r.status >= 400 and r.url.startswith(base)
                and self.seen.append(f"HTTP {r.status} {r.url}"))


@contextlib.contextmanager
def _new_page(browser, server):
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(TIMEOUT_MS)
    context.set_default_navigation_timeout(30_000)
    pg = context.new_page()
    pg.problems = Problems(pg, server.base)
    try:
        yield pg
    finally:
        context.close()


@pytest.fixture
def page(browser, tb):
    with _new_page(browser, tb) as pg:
        yield pg


@pytest.fixture(scope="module")
def word_tb(tmp_path_factory):
    """A TensorBoard over what the gluonnlp example writes: ``word_vectors`` of its WORDS top words."""
    pytest.importorskip("gluonnlp")
    d = str(tmp_path_factory.mktemp("word_logs"))
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "word_embeddings_gluonnlp.py"),
                           "--logdir", d, "--epochs", "2", "--words", str(WORDS)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    with tensorboard(d, timeout=60) as server:
        yield server


# a fit of the example's net with the handler's embeddings= option (1 epoch)
EMBEDDINGS_FIT = """
import sys, warnings
sys.path.insert(0, sys.argv[2])
import mxnet as mx
from mxnet import gluon
from mxnet.gluon.contrib.estimator import Estimator
from estimator_digits import build_net, loaders
from gluon_tb.handlers import Embeddings, TensorBoardHandler
mx.random.seed(0)
train, val = loaders(64)
net = build_net()
net.initialize(mx.init.Xavier())
net.hybridize()
est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), context=mx.cpu(),
                trainer=gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.05}))
with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)
    est.fit(train, val_data=val, epochs=1, event_handlers=[
        TensorBoardHandler(sys.argv[1], embeddings=Embeddings(samples=int(sys.argv[3])))])
"""


@pytest.fixture(scope="module")
def embeddings_tb(tmp_path_factory):
    """A TensorBoard over a fit with ``embeddings=Embeddings(samples=SAMPLES)``."""
    d = str(tmp_path_factory.mktemp("embeddings_logs"))
    proc = subprocess.run([sys.executable, "-c", EMBEDDINGS_FIT, d, os.path.join(ROOT, "examples"), str(SAMPLES)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    with tensorboard(d, timeout=60) as server:
        yield server


def _projector_active(server) -> None:
    deadline = time.time() + 30  # the projector decides it is active on a thread of its own
    while not server.get("/data/plugins_listing")["projector"]["enabled"]:
        assert time.time() < deadline, "TensorBoard never found the embedding: projector inactive"
        time.sleep(0.5)


def _open(page, tb, dashboard: str) -> None:
    page.goto(f"{tb.base}/#{dashboard}")


@contextlib.contextmanager
def _screenshot(page, shots: str, name: str):
    """Screenshot on the way out, passed or failed, so a failure leaves a picture of the page."""
    try:
        yield
    finally:
        page.screenshot(path=os.path.join(shots, name), timeout=TIMEOUT_MS)


def _assert_clean(scope, page) -> None:
    shown = scope.get_by_text(ERROR_TEXT).filter(visible=True).all_inner_texts()
    assert shown == [], f"error text on the page: {shown}"
    assert page.problems.seen == []


def _filtered(dashboard):
    """The category of the cards that match the tag filter (the other categories repeat them)."""
    return dashboard.locator("tf-category-paginated-view").first


def _run_color(dashboard, run: str) -> str:
    """The colour TensorBoard gave ``run`` in the run selector, which must be checked."""
    box = dashboard.locator(f"tf-runs-selector #checkbox-{run}")
    expect(box).to_have_attribute("aria-checked", "true")
    color = re.search(r"--paper-checkbox-checked-color:\s*(#[0-9a-f]{6})", box.get_attribute("style"))
    assert color, box.get_attribute("style")
    return color.group(1)


# ------------------------------------------------------------------ the dashboards
def test_scalars_chart_epoch_loss_and_accuracy_for_train_and_validation(page, tb, shots):
    # The tag filter puts both tags into one opened category; two epochs are two points, so no
    # smoothing (both kept in the URL, as TensorBoard does).
    _open(page, tb, "scalars&_smoothingWeight=0&tagFilter=%5Eepoch_%28loss%7Caccuracy%29%24")
    dash = page.locator("tf-scalar-dashboard")
    with _screenshot(page, shots, "scalars.png"):
        colors = {run: _run_color(dash, run) for run in ("train", "validation")}
        dash.get_by_role("checkbox", name="Ignore outliers in chart scaling").uncheck()
        cards = []
        for tag in ("epoch_loss", "epoch_accuracy"):
            card = _filtered(dash).locator("tf-scalar-card").filter(has=page.get_by_text(tag, exact=True))
            expect(card).to_have_count(1)
            for run, color in colors.items():  # a line in the run's colour through both epochs
                expect(card.locator(f'path.line[stroke="{color}"][d*="L"]').first, run).to_be_attached()
            cards.append(card)
        for card in cards:  # every run has loaded: fit the axes to all of them for the screenshot
            card.locator('paper-icon-button[title="Fit domain to data"]').click()
        _assert_clean(dash, page)


def test_graph_shows_the_nodes_of_our_network(page, tb, shots):
    _open(page, tb, "graphs&run=train")
    scope = page.locator('g.node[data-name="digits"]')
    with _screenshot(page, shots, "graph.png"):
        scope.locator(".nodeshape").first.dblclick()  # expand the network's name scope
        expect(page.locator('g.node[data-name="digits/dense1"]')).to_be_visible()
        names = set(page.locator("g.node.meta").evaluate_all("gs => gs.map(g => g.dataset.name)"))
        assert names == {"digits"} | {f"digits/{layer}" for layer in LAYERS}
        assert page.locator('g.node[data-name="data"]').count() == 1
        _assert_clean(page.locator("tf-graph-dashboard"), page)


def test_images_show_the_first_batch(page, tb, shots):
    _open(page, tb, "images")
    dash = page.locator("tf-image-dashboard")
    with _screenshot(page, shots, "images.png"):
        card = dash.locator("tf-image-loader").filter(has=page.get_by_text("first_batch", exact=True))
        img = card.locator("img")
        expect(img).to_be_visible()
        page.wait_for_function("i => i.complete && i.naturalWidth > 0", arg=img.element_handle())
        width, height = img.evaluate("i => [i.naturalWidth, i.naturalHeight]")
        assert width >= 32 and height >= 32, (width, height)  # a grid of 8x8 digits
        _assert_clean(dash, page)


def test_histograms_show_every_weight(page, tb, shots):
    _open(page, tb, "histograms&tagFilter=%5Eweights%2F")
    dash = page.locator("tf-histogram-dashboard")
    expected = {t for t in tb.get("/data/plugin/histograms/tags")["train_batch"] if t.startswith("weights/")}
    assert len(expected) == 2 * 4  # weight and bias of 4 layers
    with _screenshot(page, shots, "histograms.png"):
        cards = _filtered(dash).locator("tf-histogram-loader")
        expect(cards).to_have_count(len(expected))
        for tag in sorted(expected):
            card = cards.filter(has=page.get_by_text(tag, exact=True))
            expect(card).to_have_count(1)
            expect(card.locator("g.histogram path.outline")).to_have_count(EPOCHS)  # one per epoch
        _assert_clean(dash, page)


def test_text_is_rendered_as_markdown(page, tb, shots):
    _open(page, tb, "text")
    dash = page.locator("tf-text-dashboard")
    with _screenshot(page, shots, "text.png"):
        view = dash.locator("tf-text-loader tf-markdown-view")
        expect(view.locator("h2")).to_have_text("Digits run")
        expect(view.locator("strong")).to_have_text("bold")
        expect(view.locator("a")).to_have_attribute("href", "https://mxnet.apache.org")
        assert "**" not in view.first.inner_text()
        _assert_clean(dash, page)


def test_projector_shows_every_point_with_labels_and_thumbnails(page, tb, shots):
    _projector_active(tb)
    frame = page.frame_locator("iframe").frame_locator("iframe")  # plugin entry, then the projector
    with _screenshot(page, shots, "projector.png"):
        with page.expect_response(lambda r: "/projector/sprite_image?" in r.url) as sprite:
            _open(page, tb, "projector")
        expect(frame.get_by_text(re.compile(r"Points: \d+"))).to_have_text(f"Points: {EMBEDDED}")
        expect(frame.get_by_text(re.compile(r"Dimension: \d+"))).to_have_text("Dimension: 64")
        expect(frame.get_by_text("1 tensor found")).to_be_visible()
        # "Color by" offers the label column with its 10 distinct values: metadata.tsv was parsed.
        expect(frame.get_by_text(re.compile(r"^\s*label\s+10\s+colors\s*$")).first).to_be_attached()
        response = sprite.value
        assert response.status == 200 and response.body()[:8] == b"\x89PNG\r\n\x1a\n"
        shown = frame.get_by_text(ERROR_TEXT).filter(visible=True).all_inner_texts()
        assert shown == [], f"error text in the projector: {shown}"
        assert page.problems.seen == []


def test_audio_and_pr_curves_show_our_data(page, tb, shots):
    _open(page, tb, "audio")
    dash = page.locator("tf-audio-dashboard")
    audio = dash.locator("audio")
    expect(audio).to_have_count(1)
    page.wait_for_function("a => a.readyState >= 1", arg=audio.element_handle())
    assert audio.evaluate("a => a.duration") == pytest.approx(1.0, abs=0.01)  # 8000 samples at 8 kHz
    _assert_clean(dash, page)

    _open(page, tb, "pr_curves")
    dash = page.locator("tf-pr-curve-dashboard")
    card = dash.locator("tf-pr-curve-card").filter(has=page.get_by_text("is_zero", exact=True))
    expect(card.locator("path.line").first).to_be_attached()
    _assert_clean(dash, page)


def test_projector_shows_the_handlers_embeddings_with_true_and_predicted_labels(browser, embeddings_tb, shots):
    """``embeddings=Embeddings(samples=SAMPLES)``: the classifier's input (the 64-unit layer) of
    SAMPLES held-out digits, with the columns ``label`` and ``predicted`` and thumbnails."""
    _projector_active(embeddings_tb)
    with _new_page(browser, embeddings_tb) as page:
        frame = page.frame_locator("iframe").frame_locator("iframe")  # plugin entry, then the projector
        with _screenshot(page, shots, "embeddings.png"):
            with page.expect_response(lambda r: "/projector/metadata?" in r.url) as meta:
                with page.expect_response(lambda r: "/projector/sprite_image?" in r.url) as sprite:
                    _open(page, embeddings_tb, "projector")
            rows = meta.value.body().decode("utf-8").splitlines()
            assert rows[0].split("\t") == ["label", "predicted"] and len(rows) == SAMPLES + 1
            assert {r.split("\t")[0] for r in rows[1:]} <= {str(k) for k in range(10)}
            assert sprite.value.status == 200 and sprite.value.body()[:8] == b"\x89PNG\r\n\x1a\n"
            expect(frame.get_by_text(re.compile(r"Points: \d+"))).to_have_text(f"Points: {SAMPLES}")
            expect(frame.get_by_text(re.compile(r"Dimension: \d+"))).to_have_text("Dimension: 64")
            # "Color by" offers both columns: the metadata was parsed with its header
            expect(frame.get_by_text(re.compile(r"^\s*label\s+\d+\s+colors\s*$")).first).to_be_attached()
            expect(frame.get_by_text(re.compile(r"^\s*predicted\s+\d+\s+colors\s*$")).first).to_be_attached()
            shown = frame.get_by_text(ERROR_TEXT).filter(visible=True).all_inner_texts()
            assert shown == [], f"error text in the projector: {shown}"
            assert page.problems.seen == []


def test_projector_shows_word_vectors_labelled_with_their_words(browser, word_tb, shots):
    """``word_vectors=WordVectors(...)`` of the gluonnlp example: WORDS points, found by their word."""
    _projector_active(word_tb)
    with _new_page(browser, word_tb) as page:
        frame = page.frame_locator("iframe").frame_locator("iframe")  # plugin entry, then the projector
        with _screenshot(page, shots, "word_vectors.png"):
            with page.expect_response(lambda r: "/projector/metadata?" in r.url) as meta:
                _open(page, word_tb, "projector")
            assert "name=word_vectors" in meta.value.url  # the tensor's name: the handler's tag
            words = meta.value.body().decode("utf-8").splitlines()
            assert len(words) == WORDS and "function" in words  # one column of words, no header
            expect(frame.get_by_text(re.compile(r"Points: \d+"))).to_have_text(f"Points: {WORDS}")
            expect(frame.get_by_text(re.compile(r"Dimension: \d+"))).to_have_text("Dimension: 64")
            expect(frame.get_by_text("1 tensor found")).to_be_visible()
            inspector = frame.locator("vz-projector-inspector-panel")
            inspector.get_by_role("textbox").first.fill("function")  # search by label
            match = inspector.get_by_text("function", exact=True)
            expect(match).to_be_visible()
            match.click()  # select the word: its nearest words are listed, by label
            expect(inspector.get_by_text("Nearest points in the original space:")).to_be_visible()
            expect(inspector.locator(".neighbor").first).to_be_visible()
            neighbors = [t.split("\n")[0].strip() for t in inspector.locator(".neighbor").all_inner_texts()]
            assert neighbors and set(neighbors) <= set(words) - {"function"}, neighbors[:10]
            page.mouse.move(VIEWPORT["width"] // 2, VIEWPORT["height"] - 5)  # no tooltip in the picture
            shown = frame.get_by_text(ERROR_TEXT).filter(visible=True).all_inner_texts()
            assert shown == [], f"error text in the projector: {shown}"
            assert page.problems.seen == []
