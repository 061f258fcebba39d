"""Concurrent browser sessions, each with its own configuration, against one server.

Four sessions here — every page of each, both frameworks, every mask, heads 1, 2, 4 and 8 (what six
covered, in two thirds of the time); benchmarks/load_test.py runs ten (`--sessions N` for more) for
the figures in docs/load.md. These pages run in the server (`attnviz.app.sidebar.runs`), so the
server's workers are not started."""

import json

import pytest

from tests.browser.load import run_load
from tests.live import ARTIFACTS, Server

pytestmark = pytest.mark.browser
SESSIONS = 4
MEMORY_LIMIT_MIB = 6 * 1024  # the machine has 24 GiB; one server must stay far below


@pytest.mark.timeout(900)
def test_concurrent_sessions_each_see_their_own_configuration():
    srv = Server(env={"ATTNVIZ_WARM_WORKERS": "0"})  # its own server: the memory figure is this test's alone
    try:
        figures = run_load(srv.url, srv.proc.pid, SESSIONS)
    finally:
        srv.stop()
    (ARTIFACTS / "load.json").write_text(json.dumps(figures, indent=2))
    assert figures["problems"] == []
    assert figures["pages_served"] == 3 * SESSIONS
    assert figures["server_rss_peak_mib"] < MEMORY_LIMIT_MIB, figures
