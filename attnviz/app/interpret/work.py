"""The Interpretability page's computations: each runs in a worker through the door
(`attnviz.app.frame.door`, tasks of `attnviz.app.interpret.tasks`), its value kept in the server's
byte-bounded cache under its settings (the checkpoint's folder, texts, numbers), so a result is
shared by every visitor who asks the same question and counted against `ATTNVIZ_CACHE_MB`.
Each is refused before it runs when its estimate is over the per-run budget (`pretrained.budget`).
"""

from __future__ import annotations

import functools
import io

import numpy as np
import streamlit as st

from attnviz import formats, masks
from attnviz.app.frame import door, session
from attnviz.app.frame.checkpoints import checkpoint_choices as checkpoint_choices  # the page's list
from attnviz.app.frame.checkpoints import open_checkpoint as open_checkpoint
from attnviz.app.frame.link_values import TEXT_LIMITS
from attnviz.app.frame.widgets import chosen_device
from attnviz.app.interpret import tasks
from attnviz.errors import SpecError
from attnviz.interp import circuits, lens, patching, roles
from attnviz.plots import heatmaps, interp
from attnviz.pretrained import budget
from attnviz.pretrained import tasks as checkpoint_tasks
from attnviz.settings import APP_MEMORY_BUDGET

LENS_TOP = 5
# The patching tab's first example: indirect-object identification (Wang et al., 2022).
CLEAN = "When Mary and John went to the store, John gave a drink to"
CORRUPTED = "When Mary and John went to the store, Mary gave a drink to"
ANSWER, WRONG = " Mary", " John"
# The prompt fields the Patching, Direct logit and Editor tabs share: one link key each, so a prompt typed
# on one tab is the prompt of the others (`prompt_box`).
PROMPTS = {
    "interp.clean": CLEAN,
    "interp.corrupted": CORRUPTED,
    "interp.answer": ANSWER,
    "interp.wrong": WRONG,
}
MAX_SWEEP_RUNS = 320 * 48  # heads × tokens a patching sweep may run here (SmolLM2 on 48 tokens)
MAX_SCAN_TOKENS = 4 * 64  # sequences × tokens of a head-role scan


def prompt_box(where, key: str, label: str) -> str:
    """One of the shared prompt fields (`PROMPTS`) in `where` (a column): bound to the link under `key`,
    cut to the link guard's length for it (`TEXT_LIMITS`), so a typed and a linked prompt agree."""
    return where.text_input(label, PROMPTS[key], key=key, bind="query-params", max_chars=TEXT_LIMITS[key])


def check_lens(ckpt, text: str) -> int:
    """Refuse a lens over the per-run budget before running (the estimate and the tokens that fit)."""
    need = functools.partial(budget.lens_bytes, ckpt.config, k=LENS_TOP)
    return budget.check("The logit lens", need, len(ckpt.encode(text)[0]), APP_MEMORY_BUDGET)


def check_scan(ckpt, half: int) -> int:
    """Refuse a head-role scan (and the ablation that reruns it) over the per-run budget."""
    need = functools.partial(budget.scan_bytes, ckpt.config)
    return budget.check("A head-role scan", need, half, APP_MEMORY_BUDGET, "random tokens per half")


def device() -> str:
    """The device the page's control chose ("cpu" where no GPU is present): the lens, the role scan,
    the patching sweep and attribution run there; the other tabs' work has no device in the library."""
    return chosen_device("interp.")


def source(ckpt) -> str:
    """What a worker opens: the checkpoint's folder, which this session was allowed to open
    (`open_checkpoint`: a listed name, or this session's own saved run)."""
    return str(ckpt.path)


def lens_table(ckpt, text: str, framework: str) -> tuple[lens.LensTable, list[str]]:
    """The lens's top tokens per layer and position, and the tokens; checked against the budget first."""
    check_lens(ckpt, text)
    return door.run(
        tasks.logit_lens, source(ckpt), text, framework, LENS_TOP, device=device(),
        spinner="Reading every layer through the unembedding", cache="interp lens",
    )  # fmt: skip


def role_scan(ckpt, framework: str, half: int, n: int, seed: int) -> roles.RoleScan:
    check_scan(ckpt, half)
    return door.run(
        tasks.role_scan, source(ckpt), framework, half, n, seed, device=device(),
        spinner="Scanning every head on repeated random tokens", cache="interp scan",
    )  # fmt: skip


def induction_ablation(
    ckpt, framework: str, half: int, n: int, seed: int, k: int
) -> circuits.AblationComparison:
    check_scan(ckpt, half)
    return door.run(
        tasks.induction_ablation, source(ckpt), framework, half, n, seed, k,
        spinner="Ablating the top induction heads and random ones", cache="interp ablation",
    )  # fmt: skip


SWEEP_CACHE = "interp sweep"


def patching_sweep(ckpt, framework: str, prompts: tuple[str, str, str, str], *, run: bool):
    """The exact sweep (one patched run per head, batched per layer): kept in the server's cache;
    without `run` (no click yet) only an answer already there, else None."""
    args = (source(ckpt), *prompts, framework)
    if not run:
        return door.cached(SWEEP_CACHE, *args, device=device())[1]
    return door.run(
        tasks.patching_sweep, *args, device=device(), spinner="Patching each head", cache=SWEEP_CACHE
    )


def attribution(ckpt, framework: str, prompts: tuple[str, str, str, str]) -> patching.PatchingResult:
    """Attribution patching's estimate of every head (two forward passes and one backward)."""
    return door.run(
        tasks.attribution, source(ckpt), *prompts, framework, device=device(),
        spinner="Attribution patching: one backward pass", cache="interp attribution",
    )  # fmt: skip


def forward(ckpt, text: str, framework: str, **options):
    """The model's output on `text` (`pretrained.tasks.forward`'s options: `edit` rows, …), cached."""
    return door.run(
        checkpoint_tasks.forward, source(ckpt), text, framework, spinner="Running the model", cache="interp forward",
        **options,
    )  # fmt: skip


def sweep_on_request(ckpt, framework: str, prompts: tuple[str, str, str, str], *, key: str):
    """The exact sweep if it has run for these prompts, else a "Run the patching sweep" button and,
    on the run it asks for, the sweep. The button is gone once the sweep is there: offered after it
    had run, it read as if the sweep were still to do (issue 46)."""
    return on_request(
        "Run the patching sweep", key, functools.partial(patching_sweep, ckpt, framework, prompts)
    )


def on_request(label: str, key: str, compute):
    """`compute(run=False)` (an answer already in the cache, else None); when that is None, a
    `label` button (its click survives the page's rerun) and, on the run it asks for,
    `compute(run=True)`. The button is removed once the answer is there."""
    found = compute(run=False)
    if found is not None:
        return found
    slot = st.empty()
    session.button(label, key=key, type="primary", on_click=functools.partial(_request, key), where=slot)
    found = compute(run=bool(st.session_state.pop(_requested(key), False)))
    if found is not None:
        slot.empty()
    return found


def _requested(key: str) -> str:
    """The session-state flag of a button's request (no widget key: the page's routing rerun keeps it)."""
    return key.replace(".", "_") + "_requested"


def _request(key: str) -> None:
    """The button's callback: a flag that survives the page's routing rerun (a click alone does not)."""
    st.session_state[_requested(key)] = True


def numbers_caption(where, grid: np.ndarray, value_name: str) -> None:
    """Under a layer × head map drawn in `where` (the page or a column): which cells carry numbers."""
    if note := interp.numbers_note(grid, value_name):
        where.caption(note)


def head_clicked(chart_key: str, target_key: str) -> None:
    """A layer × head heatmap's click: show that head (its `customdata` is `(layer, head)`)."""
    points = st.session_state[chart_key].selection.points
    if points and "customdata" in points[-1]:
        layer, head = (int(v) for v in points[-1]["customdata"][:2])
        st.session_state[target_key] = formats.head(layer, head)


def check_prompts(ckpt, prompts: tuple[str, str, str, str]) -> tuple[list[int], list[int]]:
    """Refuse, before any run, what `patching.sweep` would refuse — and a sweep over this server's
    budget; else the clean and the corrupted prompt's ids (each text tokenized once here)."""
    clean, corrupted, answer, wrong = prompts
    _, _, clean_ids, corrupted_ids = patching.check_prompts(ckpt, clean, corrupted, answer, wrong)
    T = len(clean_ids)
    budget.check("A patching sweep", functools.partial(budget.sweep_bytes, ckpt.config), T, APP_MEMORY_BUDGET)
    cost = ckpt.config.num_hidden_layers * ckpt.config.num_attention_heads * T
    if cost > MAX_SWEEP_RUNS:
        raise SpecError(
            "clean", clean, f"a sweep of at most {MAX_SWEEP_RUNS:,} head-runs × tokens here; shorten the prompts",
            value_text=f"{cost:,} head-runs × tokens",
        )  # fmt: skip
    return clean_ids, corrupted_ids


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
        {
            "head": formats.head(layer, head),
            **{r: round(float(scan.scores[r][layer, head]), 4) for r in names},
        }
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


# -- what the page shows --------------------------------------------------------------------


def first_decoder(labels: list[str]) -> int:
    """The checkpoint the page opens on: the packaged decoder (SmolLM2) when it is listed — every tab
    needs a decoder but Head roles — else the first listed."""
    return labels.index(PACKAGED_DECODER) if PACKAGED_DECODER in labels else 0


PACKAGED_DECODER = "SmolLM2-135M-Instruct"


def differing(ckpt, a: list[int], b: list[int]) -> str:
    """Which tokens two prompts' ids `a` (clean) and `b` (corrupted) differ in, in a caption: what
    patching moves from one to the other."""
    at = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    if not at:
        return "The two prompts are the same tokens: patching has nothing to restore."
    names = lambda ids: [repr(t) for t in ckpt.labels(ids)]  # noqa: E731
    pairs = [f"position {i}: {x} (clean) → {y} (corrupted)" for i, x, y in
             zip(at, names([a[i] for i in at]), names([b[i] for i in at]), strict=True)]  # fmt: skip
    return "The prompts differ at " + "; ".join(pairs) + "."


def panel_title(head: str, which: str, tokens: list[str], result: patching.PatchingResult) -> str:
    """A patching panel's title: the head, "clean" or "corrupted", and its tokens where the prompts
    differ ("L23.H3 · clean · 10: ' John'")."""
    at = [
        i for i, (x, y) in enumerate(zip(result.tokens_clean, result.tokens_corrupted, strict=True)) if x != y
    ]
    shown = ", ".join(f"{i}: {tokens[i]!r}" for i in at[:3]) + (" …" if len(at) > 3 else "")
    return f"{head} · {which}" + (f" · {shown}" if shown else "")


def verdict(agree) -> str:
    """One sentence a learner can act on: is the cheap estimate enough on this prompt pair?"""
    if np.isnan(agree.rho):
        return "One of the maps is constant: the ranks cannot be compared."
    good = agree.rho >= 0.7 and agree.overlap >= 0.7 * agree.k
    if good:
        return (
            f"**The estimate ranks the heads much as exact patching does** (ρ {agree.rho:.2f}, "
            f"{agree.overlap} of the top {agree.k} in common): on this pair it is enough to pick the heads "
            "worth patching exactly."
        )
    return (
        f"**The estimate and exact patching disagree here** (ρ {agree.rho:.2f}, {agree.overlap} of the top "
        f"{agree.k} in common): trust the exact sweep, and look at the heads below."
    )


def disagreement_rows(agree, attentions: np.ndarray) -> list[dict]:
    """The heads where the estimate misses most, each with how saturated its attention is on the
    corrupted run (where attribution patching takes its gradient): the mean of its rows' largest
    weight, and the share of rows with one key at ≥ 0.9. `attentions (L, H, T, T)`."""
    rows = []
    for layer, head, exact, estimate in agree.disagree:
        top = attentions[layer, head].max(-1)  # (T,) each query's largest weight
        rows.append({
            "head": formats.head(layer, head), "exact": round(float(exact), 3), "estimate": round(float(estimate), 3),
            "missed by": round(float(estimate - exact), 3),
            "largest weight (mean of its rows)": round(float(top.mean()), 3),
            "rows with one key ≥ 0.9": f"{float((top >= SATURATED).mean()):.0%}",
        })  # fmt: skip
    return rows


SATURATED = 0.9  # a row this concentrated on one key is near the flat part of the softmax
WHY_IT_MISSES = (
    "**Why the estimate misses.** Attribution patching is one step along the gradient at the corrupted run: "
    "it assumes the answer changes linearly as a head's output moves from its corrupted to its clean value. "
    "A softmax near 0 or 1 is flat — its gradient is small — so a head whose attention is *saturated* "
    "(nearly all weight on one key) looks unimportant to the gradient even when swapping its whole output "
    "changes the answer: the estimate misses, usually by underestimating (Kramár et al., 2024, AtP*). "
    "When ρ is high and the top heads agree, the cheap map is enough to choose which heads to patch; "
    "for the heads that matter most, check with the exact sweep."
)
