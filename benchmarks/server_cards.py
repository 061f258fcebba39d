"""The server's resident memory while a visitor walks the model screens with SmolLM2 and Gemma 3
(issue 41 point 2): the server holds checkpoint cards (config, tokenizer), the workers the weights.

One server (app.py, as `streamlit run` serves it), one Chromium tab: Home, then Pretrained, Decoding
(which generates), Interpretability and Compare models with each packaged decoder; the server's RSS
(`/proc/<pid>/status`) after each page has settled. Writes its section of docs/security.md.

    python benchmarks/server_cards.py [--no-write]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.doc_section import markers, write_section  # noqa: E402
from tests.live import Server, launch_chromium, new_context, settle  # noqa: E402

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


def walk() -> list[tuple[str, float]]:
    from playwright.sync_api import sync_playwright

    srv = Server()
    rows = []
    try:
        with sync_playwright() as p:
            browser = launch_chromium(p)
            page = new_context(browser).new_page()
            page.goto(srv.url + "/")
            settle(page)
            rows.append(("Home (idle)", srv.rss() / MIB))
            for name, path in WALK:
                page.goto(srv.url + path)
                settle(page, timeout_ms=600_000)  # a busy machine: generation may take minutes
                rows.append((name, srv.rss() / MIB))
            browser.close()
    finally:
        srv.stop()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    before, started = load(), time.strftime("%d %b %Y, %H:%M UTC", time.gmtime())
    rows = walk()
    idle = rows[0][1]
    lines = [
        f"Measured {started} by `python benchmarks/server_cards.py` (load average {before} before, "
        f"{load()} after; 2 cores). The server's resident memory after each page settled, one tab:",
        "",
        "| after | server RSS | over idle |",
        "| --- | ---: | ---: |",
        *(f"| {name} | {rss:,.0f} MiB | {rss - idle:+,.0f} MiB |" for name, rss in rows),
        "",
        f"Target: within +400 MiB of the idle server. Reached: **{max(r for _, r in rows) - idle:+,.0f} MiB** "
        "at most.",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        write_section(ROOT / "docs" / "security.md", text, *markers("server-cards"))


if __name__ == "__main__":
    main()
