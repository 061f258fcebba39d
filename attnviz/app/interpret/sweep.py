"""The Interpretability page's Patching tab: exact activation patching beside attribution patching
(issue 30 §2) — the two (L × H) maps on one colour scale, the scatter of exact against estimate
with the diagonal, Spearman's ρ and the top-10 overlap, the heads where the estimate misses most
and why (saturated attention; Kramár et al., 2024, AtP*) — and the chosen head's attention on the
clean and the corrupted prompt, each panel titled which it is, with the tokens that differ.
"""

from __future__ import annotations

import functools

import numpy as np
import streamlit as st

from attnviz import formats
from attnviz.app.frame import session
from attnviz.app.interpret import figures as plots
from attnviz.app.interpret import work
from attnviz.interp import attribution_patching
from attnviz.plots import interp

URL = "query-params"


def patching_tab(ckpt, framework: str) -> None:
    """Clean and corrupted prompts, attribution patching's estimate at once, the exact sweep on
    request; then the two compared, and the chosen head's attention on both prompts."""
    L, H = ckpt.config.num_hidden_layers, ckpt.config.num_attention_heads
    st.markdown(
        "Run a **clean** prompt and a **corrupted** one with the same number of tokens; then rerun the corrupted "
        "prompt with one head's output taken from the clean run, head by head. Each cell is the share of the "
        "clean − corrupted logit difference (answer − wrong token, last position) that head restores. "
        "**Attribution patching** estimates every cell at once from one backward pass; the exact sweep says "
        "how far to trust it."
    )
    c1, c2 = st.columns(2)
    clean = work.prompt_box(c1, "interp.clean", "Clean prompt")
    corrupted = work.prompt_box(c2, "interp.corrupted", "Corrupted prompt")
    answer = work.prompt_box(c1, "interp.answer", "Answer token")
    wrong = work.prompt_box(c2, "interp.wrong", "Wrong token")
    prompts = (clean, corrupted, answer, wrong)
    st.caption(work.differing(ckpt, *work.check_prompts(ckpt, prompts)))
    estimate = work.attribution(ckpt, framework, prompts)
    st.caption(
        f"The exact sweep runs the model once per head ({L * H} heads, batched by layer). Changing a field, or "
        "leaving the page, stops it."
    )
    result = work.sweep_on_request(ckpt, framework, prompts, key="interp.run_sweep")
    st.markdown(
        f"Logit difference {estimate.answer!r} − {estimate.wrong!r}: clean **{estimate.clean_diff:.3f}**, "
        f"corrupted **{estimate.corrupted_diff:.3f}**."
    )
    if result is None:
        session.chart(
            interp.layer_head_heatmap(
                estimate.restored, "Attribution patching: estimated share restored (click a head)", "estimate",
                diverging=True,
            ),
            width="stretch", key="interp.estimate", selection_mode=("points",),
            on_select=functools.partial(work.head_clicked, "interp.estimate", "interp.patch_head"),
        )  # fmt: skip
        work.numbers_caption(st, estimate.restored, "estimate")
        st.caption("Run the exact sweep to see where this estimate can be trusted.")
        return
    agreement(result, estimate)
    a, b = np.unravel_index(np.nanargmax(result.restored), result.restored.shape)
    st.markdown(
        f"Most restoring head: **{formats.head(a, b)}** ({result.restored[a, b]:.2f} of the difference)."
    )
    heads = [formats.head(x, y) for x in range(L) for y in range(H)]
    chosen = st.selectbox(
        "Its attention on both prompts (or click a head above)", heads, index=int(a * H + b),
        key="interp.patch_head", bind=URL,
    )  # fmt: skip
    a, b = formats.parse_head(chosen)
    runs = (
        ("clean", result.tokens_clean, result.clean),
        ("corrupted", result.tokens_corrupted, result.corrupted),
    )
    for (which, tokens, run), column in zip(runs, st.columns(2), strict=True):  # the sweep's own runs
        title = work.panel_title(chosen, which, tokens, result)
        column.plotly_chart(work.head_map(run.attentions[a, b], tokens, title, True), width="stretch")
    st.download_button(
        "Download (CSV)", work.grid_csv(result.restored, "restored"), "patching.csv", "text/csv"
    )


def agreement(result, estimate) -> None:
    """Exact patching beside attribution patching: the two maps on one scale, the scatter, Spearman's
    ρ and the top-10 overlap, and the heads where the estimate misses most, with why."""
    exact, guess = result.restored, estimate.restored
    limit = float(np.nanmax(np.abs(np.concatenate([exact.ravel(), guess.ravel()]))))
    c1, c2 = st.columns(2)
    session.chart(
        interp.layer_head_heatmap(
            exact, "Exact patching: share restored (click a head)", "restored", diverging=True, limit=limit,
        ),
        width="stretch", key="interp.patching", selection_mode=("points",), where=c1,
        on_select=functools.partial(work.head_clicked, "interp.patching", "interp.patch_head"),
    )  # fmt: skip
    c2.plotly_chart(
        interp.layer_head_heatmap(
            guess, "Attribution patching: the first-order estimate", "estimate", diverging=True, limit=limit
        ),
        width="stretch", key="interp.estimate",
    )  # fmt: skip
    work.numbers_caption(c1, exact, "restored")
    work.numbers_caption(c2, guess, "estimate")
    agree = attribution_patching.agreement(exact, guess, k=10, worst=5)
    c1, c2 = st.columns(2)
    c1.metric("Spearman's ρ (rank agreement, all heads)", f"{agree.rho:.2f}")
    c2.metric(f"Top-{agree.k} heads in common", f"{agree.overlap} of {agree.k}")
    st.markdown(work.verdict(agree))
    worst = [(x, y) for x, y, _, _ in agree.disagree]
    st.plotly_chart(plots.agreement_scatter(exact, guess, worst), width="stretch", key="interp.agreement")
    # the corrupted run's attention (where the gradient was taken), as the sweep computed it
    st.dataframe(work.disagreement_rows(agree, result.corrupted.attentions), hide_index=True, width="stretch")
    st.markdown(work.WHY_IT_MISSES)
