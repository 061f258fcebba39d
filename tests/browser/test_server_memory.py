"""Issue 10 §3 and issue 20 §3 against a live server: the results the server keeps stay bounded, and
go away on time without a request.

Six URL loads of `/explorer?len_q=512&n_heads=16&d_model=16&seed=N` (≈ 67 MB each) once left every
result cached for good (the server grew by gigabytes). With one byte-bounded cache (ATTNVIZ_CACHE_MB)
the growth stays under the cache budget plus the one run in flight (this test's one tab; the
explorer's runs come back from a worker and are kept in the server's cache). Then every tab closes and,
with no request reaching the server, the entries' TTL (ATTNVIZ_CACHE_TTL_S) hands the memory back.
One server for both (its workers are not warmed: the first run starts one).
"""

import json
import time

import pytest

from attnviz.cache import MIB
from attnviz.settings import APP_MEMORY_BUDGET
from tests.live import ARTIFACTS, MemorySampler, Server, settle

pytestmark = pytest.mark.browser
CACHE_MB = 200
TTL_S = 10  # the entries' lifetime; the test waits for memory to come back, never a fixed time
LOADS = 6  # ≈ 67 MB each: twice what the 200 MB cache holds
LARGE = "len_q=512&n_heads=16&d_model=16"


@pytest.mark.timeout(900)
def test_large_results_stay_under_the_bound_and_expire_without_a_request(new_page):
    srv = Server(
        env={
            "ATTNVIZ_CACHE_MB": str(CACHE_MB),
            "ATTNVIZ_CACHE_TTL_S": str(TTL_S),
            "ATTNVIZ_WARM_WORKERS": "0",
        }
    )
    try:
        page = new_page()
        _open(
            page, f"{srv.url}/explorer?len_q=4&n_heads=2&d_model=8&seed=0"
        )  # frameworks in, ~nothing cached
        base = srv.rss()
        sampler = MemorySampler(srv.proc.pid)
        sampler.start()
        for seed in range(1, LOADS + 1):
            _open(page, f"{srv.url}/explorer?{LARGE}&seed={seed}")
            assert page.locator('[data-testid="stException"]').count() == 0
        page.context.close()  # every tab closed; from here on no request reaches the server
        peak = sampler.stop()
        held = peak - base
        assert held > 50 * MIB, f"the results never took memory: {held / MIB:.0f} MiB"
        waited = _until_back(srv, base, held, deadline_s=3 * TTL_S + 60)
        idle = srv.rss()
    finally:
        srv.stop()
    bound = CACHE_MB * MIB + APP_MEMORY_BUDGET
    figures = {
        k: v / MIB for k, v in {"base": base, "peak": peak, "bound": bound, "after_idle": idle}.items()
    }
    (ARTIFACTS / "server-memory.json").write_text(json.dumps({**figures, "waited_s": waited}, indent=2))
    assert held < bound, figures
    assert idle - base < 0.5 * held, f"memory did not come back after the TTL: {figures} MiB"


def _open(page, url: str) -> None:
    page.goto(url)
    page.locator('[data-testid="stMain"] .js-plotly-plot').first.wait_for(state="visible", timeout=300_000)
    settle(page, 300_000)


def _until_back(srv: Server, base: int, held: int, deadline_s: float) -> float:
    """Poll the server's RSS, sending it no request (the timer, not a visitor, must expire the entries),
    until at most half of what the results held remains; the seconds that took, or the deadline."""
    start = time.monotonic()
    while srv.rss() - base >= 0.5 * held and time.monotonic() - start < deadline_s:
        time.sleep(0.5)  # a polling interval, not a wait for luck: the condition ends the loop
    return time.monotonic() - start
