"""Many users at once: concurrent headless-Chromium sessions against one server.

Each session opens the explorer, step-by-step and comparison pages with its own
configuration and checks that what it is shown is its own (the weights' shape,
the heads plotted, the framework); with `every_screen`, it then opens every other screen of the
app (`attnviz.app.frame.pages.PAGES`, each at its defaults) and checks that it settles without an
exception. The server's memory is sampled throughout, and read once more when every session has
walked its screens (their tabs still open). Used by tests/browser/test_load.py and
benchmarks/load_test.py (issue 42: ten visitors, every screen).
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time

from tests.live import (
    ARTIFACTS,
    COUNT_RUNS,
    NOT_STALE,
    RAN,
    SETTLE_MS,
    SETTLED,
    WAIT_MS,
    MemorySampler,
    launch_chromium,
    rss_bytes,
)

HEADS = (1, 2, 4, 8)
PAGES = ("explorer", "steps", "compare")  # opened with the session's own configuration, checked


def other_screens() -> list[str]:
    """Every screen of the app but `PAGES`, in the navigation's order."""
    from attnviz.app.frame.pages import PAGES as ROUTED

    return [p.name for p in ROUTED if p.name not in PAGES]


def session_config(i: int) -> dict[str, str]:
    """A configuration unique to session i (its weights' shape tells it apart)."""
    return {
        "n_heads": str(HEADS[i % len(HEADS)]),
        "len_q": str(5 + i),
        "seed": str(i),
        "framework": "tensorflow" if i % 2 else "torch",
        "mask": ("causal", "none", "padding")[i % 3],
    }


async def _settle(page, timeout_ms: int = SETTLE_MS) -> None:
    await page.wait_for_function(RAN, timeout=timeout_ms)  # a run of this document has begun
    await page.wait_for_selector(SETTLED, timeout=timeout_ms)
    await page.wait_for_function(NOT_STALE, timeout=timeout_ms)


async def _session(browser, url: str, i: int, every_screen: bool, walked, settle_ms: int) -> dict:
    """Session `i`: its three configured pages (checked), then with `every_screen` every other screen;
    `walked` (an `asyncio.Barrier` or None) is awaited with its tab still open once it has walked."""
    cfg = session_config(i)
    query = "&".join(f"{k}={v}" for k, v in cfg.items())
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    await context.add_init_script(COUNT_RUNS)
    context.set_default_timeout(WAIT_MS)
    page = await context.new_page()
    times, problems = [], []
    screens = [(name, f"{url}/{name}?{query}") for name in PAGES]
    screens += [(name, f"{url}/{name}") for name in (other_screens() if every_screen else [])]
    try:
        for name, link in screens:
            start = time.perf_counter()
            try:
                await page.goto(link, timeout=settle_ms)
                if name in PAGES:
                    await page.locator(".js-plotly-plot").first.wait_for(state="visible", timeout=settle_ms)
                await _settle(page, settle_ms)
            except Exception as error:  # report what the page shows instead of the chart
                problems.append(
                    f"session {i}: {name} did not settle ({type(error).__name__}); {await _shown(page, i, name)}"
                )
                continue
            times.append(time.perf_counter() - start)
            if await page.locator('[data-testid="stException"]').count():
                problems.append(f"session {i}: exception on {name}")
            if name == "explorer":
                problems += await _check_explorer(page, cfg, i, settle_ms)
        if walked is not None:
            await walked.wait()
    finally:
        await context.close()
    return {"times": times, "problems": problems}


async def _shown(page, i: int, name: str) -> str:
    """What the page shows (its text's start; a screenshot in ARTIFACTS), as far as it can be read: a
    page that did not settle may not answer either."""
    try:
        await page.screenshot(
            path=str(ARTIFACTS / f"load-session{i}-{name}.png"), full_page=True, timeout=WAIT_MS
        )
        return "page: " + (await page.locator("body").inner_text(timeout=WAIT_MS))[:400].replace("\n", " | ")
    except Exception as error:
        return f"the page did not answer either ({type(error).__name__})"


async def _check_explorer(page, cfg: dict, i: int, settle_ms: int) -> list[str]:
    """The session sees its own configuration: framework, query length, one panel per head."""
    h, n = int(cfg["n_heads"]), int(cfg["len_q"])
    try:  # a cold server first shows the NumPy reference's preview (no metrics), then the framework's run
        await page.locator('[data-testid="stMetricValue"]').first.wait_for(state="visible", timeout=settle_ms)
        await _settle(page, settle_ms)
    except Exception as error:
        return [f"session {i}: the framework's own run never replaced the preview ({type(error).__name__})"]
    metrics = await page.locator('[data-testid="stMetricValue"]').all_inner_texts()
    titles = await page.locator(".js-plotly-plot").first.locator(".annotation-text").all_text_contents()
    panels = [t for t in titles if t.startswith("head ")]
    slider = page.get_by_role("slider", name="Query length len_q")
    try:  # attached, not necessarily visible: the sidebar may still be redrawing under load
        await slider.wait_for(state="attached", timeout=60_000)
        length = await slider.get_attribute("aria-valuetext", timeout=10_000)
    except Exception as error:  # say what the page shows instead
        length = f"no length slider ({type(error).__name__}) at {page.url}"
    framework = "TensorFlow" if cfg["framework"] == "tensorflow" else "PyTorch"
    expected = [framework, str(n), h]
    seen = [metrics[0], length, len(panels)]
    return [] if seen == expected else [f"session {i}: expected {expected}, saw {seen}"]


async def _run(url: str, sessions: int, every_screen: bool, on_walked, settle_ms: int) -> list[dict]:
    from playwright.async_api import async_playwright

    # Once every session has walked its screens, `on_walked` runs (the server's memory read) while all
    # their tabs are still open.
    walked = asyncio.Barrier(sessions + 1) if every_screen else None
    async with async_playwright() as p:
        browser = await launch_chromium(p)
        try:
            tasks = [
                asyncio.create_task(_session(browser, url, i, every_screen, walked, settle_ms))
                for i in range(sessions)
            ]
            if walked is not None:
                done = asyncio.ensure_future(asyncio.gather(*tasks))
                waiting = asyncio.ensure_future(walked.wait())
                await asyncio.wait([done, waiting], return_when=asyncio.FIRST_COMPLETED)
                if waiting.done():
                    on_walked()
                else:  # a session failed before the barrier: let the others go
                    await walked.abort()
            return await asyncio.gather(*tasks)
        finally:
            await browser.close()


def _in_own_thread(fn):
    """Run `fn` in a fresh thread: the session's sync Playwright keeps an event loop running in this
    one, and asyncio.run refuses to start inside a running loop."""
    out = {}

    def target():
        try:
            out["value"] = fn()
        except BaseException as error:  # re-raised in the caller
            out["error"] = error

    worker = threading.Thread(target=target)
    worker.start()
    worker.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def run_load(
    url: str, server_pid: int, sessions: int = 10, every_screen: bool = False, settle_ms: int = SETTLE_MS
) -> dict:
    """Drive `sessions` concurrent sessions (with `every_screen`, each walks every screen; a page that has
    not settled within `settle_ms` is a problem); return the figures and any problems seen."""
    sampler = MemorySampler(server_pid)
    sampler.start()
    walked = {}
    start = time.perf_counter()
    results = _in_own_thread(
        lambda: asyncio.run(
            _run(
                url,
                sessions,
                every_screen,
                lambda: walked.setdefault("rss", rss_bytes(server_pid)),
                settle_ms,
            )
        )
    )
    wall = time.perf_counter() - start
    peak = sampler.stop()
    times = sorted(t for r in results for t in r["times"]) or [float("nan")]
    return {
        "sessions": sessions,
        "pages_served": sum(len(r["times"]) for r in results),
        "p50_settled_s": statistics.median(times),
        "p95_settled_s": times[min(len(times) - 1, round(0.95 * (len(times) - 1)))],
        "max_settled_s": times[-1],
        "wall_s": wall,
        "server_rss_start_mib": sampler.start_rss / 2**20,
        "server_rss_peak_mib": peak / 2**20,
        "server_rss_walked_mib": walked["rss"] / 2**20 if "rss" in walked else None,
        "problems": [p for r in results for p in r["problems"]],
    }
