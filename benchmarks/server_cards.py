"""The server's resident memory while a visitor walks the model screens with SmolLM2 and Gemma 3
(issue 41 point 2): the server holds checkpoint cards (config, tokenizer), the workers the weights.

One server (app.py, as `streamlit run` serves it), one Chromium tab: Home, then Pretrained, Decoding
(which generates), Interpretability and Compare models with each packaged decoder; the server's RSS
(`/proc/<pid>/status`) after each page has settled, and its peak while the page ran (sampled every
0.1 s). Writes its section of docs/security.md.

With `--every-screen`, the tab walks every screen of the app at its defaults instead, in the
navigation's order (where a visitor's server memory goes, screen by screen: docs/load.md, issue 42's
ten visitors), and prints the table without writing it.

    python benchmarks/server_cards.py [--no-write] [--every-screen]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.doc_section import markers, write_section  # noqa: E402
from tests.live import MemorySampler, Server, launch_chromium, new_context, settle  # noqa: E402

SMOL, GEMMA = "SmolLM2-135M-Instruct", "gemma-3-270m"
WALK = [
    ("Pretrained, SmolLM2", f"/pretrained?pre.checkpoint={SMOL}"),
    ("Pretrained, Gemma 3", f"/pretrained?pre.checkpoint={GEMMA}"),
    ("Decoding, SmolLM2 (generates)", f"/decoding?decoding.checkpoint={SMOL}"),
    ("Decoding, Gemma 3 (generates)", f"/decoding?decoding.checkpoint={GEMMA}"),
    ("Interpretability, SmolLM2", f"/interpret?interp.checkpoint={SMOL}"),
    ("Compare models, SmolLM2 and Gemma 3", f"/models?models.first={SMOL}&models.second={GEMMA}"),
]
MIB = 2**20


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def every_screen() -> list[tuple[str, str]]:
    """Every screen of the app but Home (walked first) at its defaults, in the navigation's order."""
    from attnviz.app.frame.pages import PAGES

    return [(page.name, f"/{page.name}") for page in PAGES if page.name != "home"]


def walk(screens: list[tuple[str, str]]) -> list[tuple[str, float, float]]:
    """(screen, the server's RSS once it settled, its peak while it ran) in MiB, after Home first."""
    from playwright.sync_api import sync_playwright

    srv = Server()
    rows = []
    try:
        with sync_playwright() as p:
            browser = launch_chromium(p)
            page = new_context(browser).new_page()
            for name, path in [("Home (idle)", "/"), *screens]:
                sampler = MemorySampler(srv.proc.pid)
                sampler.start()
                page.goto(srv.url + path)
                settle(page, timeout_ms=600_000)  # a busy machine: generation may take minutes
                rows.append((name, srv.rss() / MIB, sampler.stop() / MIB))
            browser.close()
    finally:
        srv.stop()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--every-screen", action="store_true", help="every screen at its defaults; prints only")
    args = ap.parse_args()
    before, started = load(), time.strftime("%d %b %Y, %H:%M UTC", time.gmtime())
    rows = walk(every_screen() if args.every_screen else WALK)
    idle = rows[0][1]
    lines = [
        f"Measured {started} by `python benchmarks/server_cards.py` (load average {before} before, "
        f"{load()} after; 2 cores). The server's resident memory after each page settled, one tab:",
        "",
        "| after | server RSS | over idle | peak while it ran |",
        "| --- | ---: | ---: | ---: |",
        *(
            f"| {name} | {rss:,.0f} MiB | {rss - idle:+,.0f} MiB | {peak:,.0f} MiB |"
            for name, rss, peak in rows
        ),
        "",
        f"Target: within +400 MiB of the idle server. Reached: **{max(r for _, r, _ in rows) - idle:+,.0f} MiB** "
        "at most.",
    ]
    text = "\n".join(lines)
    print(text)
    if not (args.no_write or args.every_screen):
        write_section(ROOT / "docs" / "security.md", text, *markers("server-cards"))


if __name__ == "__main__":
    main()
