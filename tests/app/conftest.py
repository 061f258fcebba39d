"""AppTest helpers: open a page of app.py, read plotted figures back from their spec."""

import base64
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest
from streamlit.util import calc_hash

from attnviz.app.frame.pages import PAGES as ROUTED
from attnviz.app.frame.pages import by_name

# Tests read the real exception text; the served app shows only its type (.streamlit/config.toml).
os.environ.setdefault("STREAMLIT_CLIENT_SHOW_ERROR_DETAILS", "full")

APP = str(Path(__file__).parents[2] / "app.py")
PAGES = [p.name for p in ROUTED]  # every page app.py routes
TIMEOUT = 180  # the first run of a page may import TensorFlow


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
    first run (it names a page by its file name, and every screen's file is `page.py`), so the
    request carries that hash; the run is checked to have left Home.
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
