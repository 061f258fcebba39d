"""Many users at once, measured: one server, N concurrent headless-Chromium sessions.

    python benchmarks/load_test.py [--sessions 10] [--out docs/load.md]

Runs a single session first (the baseline on the same machine), then N at once, each on a fresh
server, and reports pages served, p50/p95 time to a settled page and the server's peak memory.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser.load import run_load  # noqa: E402
from tests.live import Server  # noqa: E402


def measure(sessions: int) -> dict:
    srv = Server()
    try:
        return run_load(srv.url, srv.proc.pid, sessions)
    finally:
        srv.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    before, started = os.getloadavg(), time.strftime("%d %b %Y, %H:%M UTC", time.gmtime())
    runs = {1: measure(1), args.sessions: measure(args.sessions)}
    after = os.getloadavg()
    load = (
        f"Measured {started}. Load average (1 / 5 / 15 min) before: {' / '.join(f'{v:.1f}' for v in before)}; after: "
        f"{' / '.join(f'{v:.1f}' for v in after)} — the sessions' own Chromiums and the server included.\n"
    )
    print(json.dumps(runs, indent=2))
    if args.out:
        rows = [
            f"| {n} | {r['pages_served']} | {r['p50_settled_s']:.1f} s | {r['p95_settled_s']:.1f} s "
            f"| {r['wall_s']:.0f} s | {r['server_rss_start_mib']:.0f} → {r['server_rss_peak_mib']:.0f} MiB "
            f"| {len(r['problems'])} |"
            for n, r in runs.items()
        ]
        args.out.write_text(
            "## Many users at once (`python benchmarks/load_test.py`)\n\n"
            f"One `streamlit run app.py` server (fresh for each row, so the first pages include importing "
            f"PyTorch and TensorFlow) and concurrent headless-Chromium sessions, each opening the explorer, "
            f"step-by-step and comparison pages with its own configuration (heads, length, seed, framework, "
            f"mask) and checking that it sees its own (framework, query length, one panel per head). "
            f"Machine: {os.cpu_count()} cores — the browsers render on the same cores as the server, so "
            f"with many sessions the times measure the whole machine under load, browsers included.\n\n"
            "| sessions | pages served | p50 to settled page | p95 | wall | server memory (RSS) | "
            "sessions seeing another's view or an error |\n|---|---|---|---|---|---|---|\n"
            + "\n".join(rows)
            + "\n\n"
            + load
        )


if __name__ == "__main__":
    main()
