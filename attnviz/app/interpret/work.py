"""The Interpretability page's computations, cached in the server's byte-bounded cache.

Each function takes only hashable settings (the checkpoint's name, texts, numbers), so a result is
shared by every visitor who asks the same question and counted against `ATTNVIZ_CACHE_MB`; each
runs inside one of the server's computation slots (`ATTNVIZ_MAX_CONCURRENT_RUNS`).
"""

from __future__ import annotations

import functools
import io

import numpy as np
import streamlit as st

from attnviz import masks
from attnviz.app import controls
from attnviz.app.frame import results
from attnviz.app.frame.checkpoints import checkpoint_choices as checkpoint_choices  # the page's list
from attnviz.app.frame.checkpoints import open_checkpoint
from attnviz.app.frame.session import stop_when_gone
from attnviz.errors import SpecError
from attnviz.interp import circuits, lens, patching, roles
from attnviz.plots import heatmaps
from attnviz.pretrained import budget
from attnviz.settings import APP_MEMORY_BUDGET

LENS_TOP = 5
# The patching tab's first example: indirect-object identification (Wang et al., 2022).
CLEAN = "When Mary and John went to the store, John gave a drink to"
CORRUPTED = "When Mary and John went to the store, Mary gave a drink to"
ANSWER, WRONG = " Mary", " John"
MAX_SWEEP_RUNS = 320 * 48  # heads × tokens a patching sweep may run here (SmolLM2 on 48 tokens)
MAX_SCAN_TOKENS = 4 * 64  # sequences × tokens of a head-role scan


def check_lens(ckpt, text: str) -> int:
    """Refuse a lens over the per-run budget before running (the estimate and the tokens that fit)."""
    need = functools.partial(budget.lens_bytes, ckpt.config, k=LENS_TOP)
    return budget.check("The logit lens", need, len(ckpt.encode(text)[0]), APP_MEMORY_BUDGET)


def check_scan(ckpt, half: int) -> int:
    """Refuse a head-role scan (and the ablation that reruns it) over the per-run budget."""
    need = functools.partial(budget.scan_bytes, ckpt.config)
    return budget.check("A head-role scan", need, half, APP_MEMORY_BUDGET, "random tokens per half")


def lens_table(name: str, text: str, framework: str) -> tuple[lens.LensTable, list[str]]:
    """The lens's top tokens per layer and position, and the tokens; checked against the budget first."""
    check_lens(open_checkpoint(name), text)
    return _lens_table(name, text, framework)


@results.bounded("interp lens", ttl=600, spinner="Reading every layer through the unembedding…")
def _lens_table(name: str, text: str, framework: str) -> tuple[lens.LensTable, list[str]]:
    controls.load_framework(framework)
    ckpt = open_checkpoint(name)
    out = ckpt.run(text, framework)
    return lens.read(ckpt, out, LENS_TOP, progress=stop_when_gone()), ckpt.labels(out.ids)


def role_scan(name: str, framework: str, half: int, n: int, seed: int) -> roles.RoleScan:
    check_scan(open_checkpoint(name), half)
    return _role_scan(name, framework, half, n, seed)


@results.bounded("interp scan", ttl=600, spinner="Scanning every head on repeated random tokens…")
def _role_scan(name: str, framework: str, half: int, n: int, seed: int) -> roles.RoleScan:
    controls.load_framework(framework)
    ckpt = open_checkpoint(name)
    return roles.scan(ckpt, framework, half=half, n=n, seed=seed, progress=stop_when_gone())


def induction_ablation(
    name: str, framework: str, half: int, n: int, seed: int, k: int
) -> circuits.AblationComparison:
    check_scan(open_checkpoint(name), half)
    return _induction_ablation(name, framework, half, n, seed, k)


@results.bounded("interp ablation", ttl=600, spinner="Ablating the top induction heads and random ones…")
def _induction_ablation(
    name: str, framework: str, half: int, n: int, seed: int, k: int
) -> circuits.AblationComparison:
    controls.load_framework(framework)
    ckpt = open_checkpoint(name)
    gone = stop_when_gone()
    scan = roles.scan(ckpt, framework, half=half, n=n, seed=seed, progress=gone)
    return circuits.induction_ablation(ckpt, scan, k, framework, seed=seed, progress=gone)


def patching_sweep(
    name: str, framework: str, prompts: tuple[str, str, str, str], progress
) -> patching.PatchingResult:
    """A sweep, in one of the server's computation slots; not cached (it is run on request and kept
    in the visitor's session)."""
    controls.load_framework(framework)
    ckpt = open_checkpoint(name)
    clean, corrupted, answer, wrong = prompts
    gone = stop_when_gone()

    def step(done: int, total: int) -> None:
        gone()
        progress(done, total)

    with results.run_slot():
        return patching.sweep(ckpt, clean, corrupted, answer, wrong, framework, progress=step)


# -- the sweep's button and result, kept in the visitor's session -----------------------------

_REQUESTED, _KEPT = "interp_sweep_requested", "interp_sweep_result"


def request_sweep() -> None:
    """The button's callback: a flag that survives the page's routing rerun (a click alone does not)."""
    st.session_state[_REQUESTED] = True


def sweep_requested() -> bool:
    return bool(st.session_state.pop(_REQUESTED, False))


def keep_sweep(settings: tuple, result: patching.PatchingResult) -> None:
    """One sweep per session: the last one, with the settings it answered."""
    st.session_state[_KEPT] = (settings, result)


def kept_sweep(settings: tuple) -> patching.PatchingResult | None:
    """The kept sweep if it answered exactly these settings."""
    kept = st.session_state.get(_KEPT)
    return kept[1] if kept and kept[0] == settings else None


def head_clicked(chart_key: str, target_key: str) -> None:
    """A layer × head heatmap's click: show that head (its `customdata` is `(layer, head)`)."""
    points = st.session_state[chart_key].selection.points
    if points and "customdata" in points[-1]:
        layer, head = (int(v) for v in points[-1]["customdata"][:2])
        st.session_state[target_key] = f"L{layer}.H{head}"


def check_prompts(ckpt, prompts: tuple[str, str, str, str]) -> None:
    """Refuse, before any run, what `patching.sweep` would refuse — and a sweep over this server's budget."""
    clean, corrupted, answer, wrong = prompts
    patching.check_prompts(ckpt, clean, corrupted, answer, wrong)
    T = len(ckpt.encode(clean)[0])
    budget.check("A patching sweep", functools.partial(budget.sweep_bytes, ckpt.config), T, APP_MEMORY_BUDGET)
    cost = ckpt.config.num_hidden_layers * ckpt.config.num_attention_heads * T
    if cost > MAX_SWEEP_RUNS:
        raise SpecError(
            "clean", clean, f"a sweep of at most {MAX_SWEEP_RUNS:,} head-runs × tokens here; shorten the prompts",
            value_text=f"{cost:,} head-runs × tokens",
        )  # fmt: skip


def attention_on(name: str, text: str, framework: str, layer: int, head: int) -> tuple[np.ndarray, list[str]]:
    """One head's `(T, T)` attention on `text`, and the tokens."""
    controls.load_framework(framework)
    ckpt = open_checkpoint(name)
    out = ckpt.run(text, framework)
    return out.attentions[layer, head], ckpt.labels(out.ids)


def grid_csv(grid: np.ndarray, value: str) -> str:
    """`layer,head,<value>` rows of a `(L, H)` grid."""
    rows = [f"layer,head,{value}"]
    rows += [
        f"{layer},{head},{grid[layer, head]:.6g}"
        for layer in range(grid.shape[0])
        for head in range(grid.shape[1])
    ]
    return "\n".join(rows) + "\n"


def scan_csv(scan: roles.RoleScan) -> str:
    """One row per head: `layer,head,<every role>`."""
    names = list(scan.scores)
    L, H = scan.scores[names[0]].shape
    out = io.StringIO()
    out.write("layer,head," + ",".join(names) + "\n")
    for layer in range(L):
        for head in range(H):
            out.write(
                f"{layer},{head}," + ",".join(f"{scan.scores[r][layer, head]:.6g}" for r in names) + "\n"
            )
    return out.getvalue()


def lens_csv(table: lens.LensTable, tokens: list[str]) -> str:
    """One row per (layer, position): the top tokens and their probabilities."""
    out = io.StringIO()
    k = table.ids.shape[-1]
    out.write("layer,position,token," + ",".join(f"top{j + 1},p{j + 1}" for j in range(k)) + "\n")
    for r in range(table.ids.shape[0]):
        for t, token in enumerate(tokens):
            cells = ",".join(f"{_csv(table.labels[r, t, j])},{table.probs[r, t, j]:.6g}" for j in range(k))
            out.write(f"{r},{t},{_csv(token)},{cells}\n")
    return out.getvalue()


def _csv(text: str) -> str:
    return '"' + str(text).replace('"', '""') + '"'


def scan_table(scan: roles.RoleScan) -> list[dict]:
    """Rows for a sortable table: one per head, its four scores."""
    names = list(scan.scores)
    L, H = scan.scores[names[0]].shape
    return [
        {"head": f"L{layer}.H{head}", **{r: round(float(scan.scores[r][layer, head]), 4) for r in names}}
        for layer in range(L)
        for head in range(H)
    ]


def head_map(attn: np.ndarray, tokens: list[str], title: str, causal: bool):
    """One head's `(T, T)` attention: weights on a 0–1 scale; a decoder's future keys blocked."""
    T = attn.shape[-1]
    return heatmaps.matrix(
        attn, tokens, tokens, blocked=~masks.causal(T, T) if causal else None, title=title, colorscale="Blues", diverging=False,
        value_name="weight", zmax=1.0, x_title="key", y_title="query",
    )  # fmt: skip
