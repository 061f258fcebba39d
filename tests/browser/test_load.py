"""Ten concurrent browser sessions, each with its own configuration, against one server."""

import json

import pytest

from tests.browser.load import run_load
from tests.live import ARTIFACTS, Server

pytestmark = pytest.mark.browser
SESSIONS = 10
MEMORY_LIMIT_MIB = 6 * 1024  # the machine has 24 GiB; one server must stay far below


@pytest.mark.timeout(900)
def test_ten_concurrent_sessions_each_see_their_own_configuration():
    srv = Server()  # its own server, so the memory figure is this test's alone
    try:
        figures = run_load(srv.url, srv.proc.pid, SESSIONS)
    finally:
        srv.stop()
    (ARTIFACTS / "load.json").write_text(json.dumps(figures, indent=2))
    assert figures["problems"] == []
    assert figures["pages_served"] == 3 * SESSIONS
    assert figures["server_rss_peak_mib"] < MEMORY_LIMIT_MIB, figures
