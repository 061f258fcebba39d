"""Measure the training lab's targets (issue 12) and write docs/training.md with its figures.

    nice -n 5 python benchmarks/training_results.py            # everything (several minutes)
    python benchmarks/training_results.py --only agreement     # one section

Measured, not asserted: the numbers (with the machine and its load) go to
test-artifacts/training-results.json, from which docs/training.md quotes them;
the figures are plotly figures drawn by headless Chromium to docs/figures/.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

from attnviz import training as tr
from attnviz.app.training import figures as tp

ROOT = Path(__file__).parents[1]
DOC = ROOT / "docs" / "training.md"
FIGURES = ROOT / "docs" / "figures"
RESULTS = ROOT / "test-artifacts" / "training-results.json"  # the numbers docs/training.md quotes
CHROMIUM = os.environ.get("ATTNVIZ_CHROMIUM", "/usr/bin/chromium")
FRAMEWORKS = ("torch", "tensorflow")
LABEL = {"torch": "PyTorch", "tensorflow": "TensorFlow"}


def machine() -> str:
    cpu = "unknown CPU"
    if Path("/proc/cpuinfo").exists():
        names = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")]  # fmt: skip
        cpu = names[0] if names else cpu
    import tensorflow as tf
    import torch

    return (
        f"{cpu}, {os.cpu_count()} cores visible; Python {platform.python_version()}, torch {torch.__version__}, "
        f"tensorflow {tf.__version__}; PyTorch on one intra-op thread (`train(threads=1)`), TensorFlow with "
        "its default pools"
    )


def png(fig, path: Path) -> None:
    """Draw a plotly figure in headless Chromium and save it as a PNG."""
    from playwright.sync_api import sync_playwright

    width, height = int(fig.layout.width or 1000), int(fig.layout.height or 400)
    with tempfile.TemporaryDirectory() as tmp:
        html = Path(tmp) / "fig.html"
        html.write_text(fig.to_html(include_plotlyjs=True, full_html=True, config={"staticPlot": True}))
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": width + 20, "height": height + 20})
            page.goto(html.as_uri())
            page.wait_for_selector(".main-svg")
            page.locator(".plotly-graph-div").screenshot(path=str(path))
            browser.close()


def first_reaching(run: tr.TrainingRun, accuracy: float) -> dict | None:
    """The first snapshot whose held-out accuracy reaches `accuracy`."""
    return next((s for s in run.scores if s["held_out_accuracy"] >= accuracy), None)


def reached(run: tr.TrainingRun, accuracy: float) -> str:
    s = first_reaching(run, accuracy)
    return f"step {s['step']}, {s['elapsed_s']:.1f} s" if s else "not reached"


def head_scores(run: tr.TrainingRun, name: str) -> str:
    final = run.scores[-1][name]
    return ", ".join(f"L{i}: " + " / ".join(f"{v:.2f}" for v in row) for i, row in enumerate(final))


def figures(run: tr.TrainingRun, name: str) -> dict:
    """Curves and the attention at start / middle / end; middle = first snapshot at ≥ 50 % held-out."""
    middle = next(
        (i for i, s in enumerate(run.scores) if s["held_out_accuracy"] >= 0.5), len(run.scores) // 2
    )
    middle = min(max(middle, 1), len(run.scores) - 2)
    curves = tp.curves({LABEL[run.framework]: run})
    curves.update_layout(width=1000, height=330)
    png(curves, FIGURES / f"training-{name}-curves.png")
    png(
        tp.attention_over_time(run, [0, middle, len(run.snapshots) - 1]),
        FIGURES / f"training-{name}-attention.png",
    )
    scores = tp.score_lines(run)
    scores.update_layout(width=1100, height=300)
    png(scores, FIGURES / f"training-{name}-scores.png")
    return {"middle_step": run.snapshots[middle][0]}


def task_rows(task: str, frameworks=FRAMEWORKS, draw: bool = False) -> list[dict]:
    rows = []
    for fw in frameworks:
        config = tr.PRESETS[task]
        start = time.perf_counter()
        run = tr.train(config, fw)
        wall = time.perf_counter() - start
        target = 0.9 if task == "induction" else 0.99
        row = {
            "task": task,
            "framework": fw,
            "config": config.to_dict(),
            "steps": run.steps_done,
            "train_s": round(run.elapsed_s, 1),
            "wall_s": round(wall, 1),
            "final_accuracy": run.final_accuracy,
            "target": target,
            "reached": reached(run, target),
            "scores": {n: np.round(run.scores[-1][n], 3).tolist() for n in tr.SCORES},
            "load": os.getloadavg()[0],
        }
        if draw and fw == "torch":
            row |= figures(run, task)
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "config"}), flush=True)
    return rows


def agreement(steps: int = 100) -> list[dict]:
    rows = []
    for task, optimizer, lr in (
        ("reverse", "sgd", 0.5),
        ("sort", "sgd", 0.5),
        ("induction", "sgd", 0.5),
        ("induction", "adam", 0.003),
    ):
        config = tr.PRESETS[task].replace(
            dtype="float64", optimizer=optimizer, lr=lr, steps=steps, snapshot_every=50
        )
        losses = {fw: np.array([h["loss"] for h in tr.train(config, fw).history]) for fw in FRAMEWORKS}
        rel = np.abs(losses["torch"] - losses["tensorflow"]) / np.abs(losses["torch"])
        rows.append({"task": task, "optimizer": optimizer, "lr": lr, "steps": steps, "max_rel": float(rel.max()),
                     "loss_first": float(losses["torch"][0]), "loss_last": float(losses["torch"][-1])})  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    return rows


def speed(repeats: int = 3) -> list[dict]:
    """Steps/s of attnviz's layer against the framework's own, interleaved, median of `repeats`."""
    rows = []
    for task in ("reverse", "induction"):
        config = tr.PRESETS[task]
        for fw in FRAMEWORKS:
            rates: dict[str, list[float]] = {"attnviz": [], "native": []}
            for _ in range(repeats):
                for impl in rates:
                    rates[impl].append(tr.steps_per_second(config, fw, impl, steps=200, warmup=20))
            a, n = float(np.median(rates["attnviz"])), float(np.median(rates["native"]))
            rows.append({"task": task, "framework": fw, "attnviz": a, "native": n, "ratio": a / n})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["agreement", "speed", "tasks"], action="append")
    args = parser.parse_args()
    FIGURES.mkdir(parents=True, exist_ok=True)
    RESULTS.parent.mkdir(exist_ok=True)
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    wanted = args.only or ["agreement", "speed", "tasks"]
    results["machine"] = machine()
    results["date"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    results["load_before"] = os.getloadavg()[0]
    if "agreement" in wanted:
        results["agreement"] = agreement()
    if "speed" in wanted:
        results["speed"] = speed()
    if "tasks" in wanted:
        rows = task_rows("reverse", draw=True) + task_rows("induction", draw=True)
        rows += task_rows("copy", ("torch",)) + task_rows("sort", ("torch",))
        results["tasks"] = rows
    results["load_after"] = os.getloadavg()[0]
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
