"""Issue 10 §3 against a live server: many distinct large configurations, memory stays bounded.

Twelve URL loads of `/explorer?len_q=512&n_heads=16&d_model=16&seed=N` once left
every result cached for good (the server grew by gigabytes). With one byte-bounded
cache (ATTNVIZ_CACHE_MB) the growth after the first load stays under the cache
budget plus the runs in flight (attnviz.ui.cache documents the bound).
"""

import json

import pytest

from attnviz.ui.cache import MAX_CONCURRENT_RUNS, MIB
from attnviz.ui.config import APP_MEMORY_BUDGET
from tests.live import ARTIFACTS, MemorySampler, Server, settle

pytestmark = pytest.mark.browser
CACHE_MB = 200
LOADS = 10


@pytest.mark.timeout(900)
def test_distinct_large_configurations_keep_the_server_under_its_bound(new_page):
    srv = Server(env={"ATTNVIZ_CACHE_MB": str(CACHE_MB)})
    try:
        page = new_page()
        query = "len_q=512&n_heads=16&d_model=16"
        page.goto(f"{srv.url}/explorer?{query}&seed=0")
        settle(page)
        page.locator(".js-plotly-plot").first.wait_for(state="visible")
        after_first = srv.rss()  # frameworks imported, one result cached
        sampler = MemorySampler(srv.proc.pid)
        sampler.start()
        for seed in range(1, LOADS + 1):
            page.goto(f"{srv.url}/explorer?{query}&seed={seed}")
            settle(page)
            page.locator(".js-plotly-plot").first.wait_for(state="visible")
            assert page.locator('[data-testid="stException"]').count() == 0
        peak = sampler.stop()
    finally:
        srv.stop()
    growth = peak - after_first
    bound = CACHE_MB * MIB + MAX_CONCURRENT_RUNS * APP_MEMORY_BUDGET
    figures = {"after_first_mib": after_first / MIB, "peak_mib": peak / MIB, "bound_mib": bound / MIB}
    (ARTIFACTS / "server-memory.json").write_text(json.dumps(figures, indent=2))
    assert growth < bound, figures
