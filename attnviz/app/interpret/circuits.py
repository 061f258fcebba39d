"""The Interpretability page's circuit tabs — direct logit attribution, QK and OV, composition:
their widgets (bound to the URL), one cached call into `attnviz.interp` each, and their figures
(`attnviz.app.interpret.figures`, `attnviz.plots.interp`)."""

from __future__ import annotations

import functools

import numpy as np
import streamlit as st

from attnviz import formats
from attnviz.app.frame import door, session
from attnviz.app.frame.link_values import TEXT_LIMITS
from attnviz.app.interpret import figures as plots
from attnviz.app.interpret import tasks, work
from attnviz.interp import dla, qkov
from attnviz.plots import heatmaps, interp

URL = "query-params"
TOKENS = "When Mary and John went to the store, John gave"  # the QK/OV tables' first example
SIDES = ("its inputs", "its readers")  # the earlier heads it reads, the later heads that read it


def logit_attribution(ckpt, framework: str, text: str, answer: str, wrong: str) -> dla.LogitAttribution:
    return door.run(
        tasks.logit_attribution, work.source(ckpt), text, answer, wrong, framework,
        spinner="Splitting the logit difference into its parts", cache="interp dla",
    )  # fmt: skip


def copying_scores(ckpt) -> np.ndarray:
    return door.run(
        tasks.copying_scores, work.source(ckpt), spinner="Eigenvalues of every head's OV circuit",
        cache="interp copying", ttl=1800,
    )  # fmt: skip


def composition_rows(ckpt, kind: str, rows: tuple[tuple[int, int, bool], ...]) -> list[qkov.CompositionRow]:
    """Each `(layer, head, reads)` head's composition with the heads it reads or that read it."""
    return door.run(
        tasks.composition_rows, work.source(ckpt), kind, rows, spinner="Composing the head with every other",
        cache="interp composition rows", ttl=1800,
    )  # fmt: skip


def every_pair(ckpt, kind: str, *, run: bool) -> qkov.Composition | None:
    """Every pair of heads (L·H times one head's rows): on request (`run`), else only a cached answer."""
    if not run:
        return door.cached("interp composition", work.source(ckpt), kind)[1]
    return door.run(
        tasks.composition, work.source(ckpt), kind, spinner="Composing every pair of heads",
        cache="interp composition", ttl=1800,
    )  # fmt: skip


def circuit_tokens(ckpt, text: str) -> list[int]:
    """The distinct tokens of `text`, in order, at most `qkov.MAX_TOKENS`."""
    ids = list(dict.fromkeys(ckpt.encode(text)[0]))
    return ids[: qkov.MAX_TOKENS]


def head_names(L: int, H: int) -> list[str]:
    return [formats.head(a, b) for a in range(L) for b in range(H)]


def parse_head(chosen: str) -> tuple[int, int]:
    a, b = formats.parse_head(chosen)
    return a, b


def _scan_heads(ckpt, framework: str, scan: tuple[int, int, int]):
    """The role scan's previous-token head and its four best induction heads."""
    found = work.role_scan(ckpt, framework, *scan)
    return found.top("previous_token", 1)[0], found.top("induction", 4)


def dla_tab(ckpt, framework: str) -> None:
    """The DLA map, the parts it sums with, and — after a patching sweep — the two compared."""
    st.markdown(
        "Which heads **write** the answer? At the last position each head's output goes through its slice "
        "of the output projection, the final norm (its divisor read from this run) and the unembedding: "
        "its **direct** share of logit(answer) − logit(wrong). The parts below add up to the model's own "
        "difference. A head that matters under **patching** but writes little directly acts through later layers."
    )
    c1, c2 = st.columns(2)
    clean = work.prompt_box(c1, "interp.clean", "Prompt (the patching tab's clean prompt)")
    corrupted = work.prompt_box(c2, "interp.corrupted", "Corrupted prompt (for patching)")
    answer = work.prompt_box(c1, "interp.answer", "Answer token")
    wrong = work.prompt_box(c2, "interp.wrong", "Wrong token")
    parts = logit_attribution(ckpt, framework, clean, answer, wrong)
    st.plotly_chart(
        interp.layer_head_heatmap(
            parts.heads, f"Direct logit attribution: logit({parts.answer!r}) − logit({parts.wrong!r})", "direct",
            diverging=True,
        ),
        width="stretch", key="interp.dla_map",
    )  # fmt: skip
    work.numbers_caption(st, parts.heads, "direct")
    st.plotly_chart(plots.logit_parts(parts), width="stretch", key="interp.dla_parts")
    st.download_button("Download the map (CSV)", work.grid_csv(parts.heads, "direct"), "dla.csv", "text/csv")
    prompts = (clean, corrupted, answer, wrong)
    work.check_prompts(ckpt, prompts)
    sweep = work.sweep_on_request(ckpt, framework, prompts, key="interp.dla_sweep")
    if sweep is None:
        st.caption("Run the patching sweep to compare each head's direct share with what patching restores.")
        return
    st.plotly_chart(
        plots.dla_vs_patching(parts.heads, sweep.restored, parts.logit_diff),
        width="stretch",
        key="interp.dla_vs",
    )
    st.dataframe(direct_or_indirect(parts, sweep.restored), hide_index=True, width="stretch")


def direct_or_indirect(parts: dla.LogitAttribution, restored: np.ndarray, n: int = 8) -> list[dict]:
    """The `n` heads patching ranks highest, each called direct when its direct share of the clean
    difference is at least half of what patching restores, else indirect (through later layers); a
    direct head whose own term is negative writes against the answer (it lowers logit(answer) −
    logit(wrong); its share has that sign too unless the clean difference itself is negative)."""
    H = restored.shape[1]
    share = parts.heads / parts.logit_diff if parts.logit_diff else np.zeros_like(parts.heads)
    order = np.argsort(-np.abs(np.nan_to_num(restored)), axis=None, kind="stable")[:n]
    rows = []
    for i in order:
        a, b = divmod(int(i), H)
        direct = abs(share[a, b]) >= 0.5 * abs(restored[a, b])
        rows.append({
            "head": formats.head(a, b), "patching restores": round(float(restored[a, b]), 3),
            "direct share": round(float(share[a, b]), 3),
            "reading": reading(float(parts.heads[a, b])) if direct else "matters through later layers",
        })  # fmt: skip
    return rows


def reading(term: float) -> str:
    """A direct head's reading by the sign of its direct term, logit(answer) − logit(wrong)."""
    return "writes the answer directly" if term >= 0 else "writes against the answer directly"


def qkov_tab(ckpt, framework: str, scan: tuple[int, int, int]) -> None:
    """One head's QK and OV tables over tokens the visitor types; every head's copying score."""
    L, H = ckpt.config.num_hidden_layers, ckpt.config.num_attention_heads
    (pl, ph, _), induction = _scan_heads(ckpt, framework, scan)
    st.markdown(
        "**Why** a head attends: its QK circuit scores each token as a query against each as a key (token "
        "embeddings through the layer's input norm, then W_Q W_Kᵀ). **What** it writes: its OV circuit says "
        "which logits rise when it attends to a token — a *copying* head raises the token's own. "
        f"The role scan found the previous-token head **{formats.head(pl, ph)}** and induction heads "
        + ", ".join(f"**{formats.head(a, b)}**" for a, b, _ in induction) + ". These circuits are read from the weights "
        "(NumPy, float64): the same in either framework."
    )  # fmt: skip
    names = head_names(L, H)
    first = names.index(formats.head(induction[0][0], induction[0][1]))
    c1, c2, c3 = st.columns([1, 3, 1])
    chosen = c1.selectbox("Head", names, index=first, key="interp.circuit_head", bind=URL)
    text = c2.text_input(
        "Tokens (the distinct tokens of this text)",
        TOKENS,
        key="interp.circuit_text",
        bind=URL,
        max_chars=TEXT_LIMITS["interp.circuit_text"],
    )
    rotary = getattr(ckpt.config, "rope_theta", None) is not None or hasattr(ckpt.config, "rope_local")
    offset = int(c3.number_input(
        "Query − key distance", 0, ckpt.config.max_position_embeddings - 1, 1, key="interp.offset", bind=URL,
        disabled=not rotary, help="RoPE makes a score depend on how far apart the tokens are.",
    ))  # fmt: skip
    a, b = parse_head(chosen)
    ids = circuit_tokens(ckpt, text)
    qk, ov = door.run(
        tasks.circuit_tables, work.source(ckpt), a, b, ids, offset, spinner="Reading the head's QK and OV circuits",
        cache="interp circuit tables",
    )  # fmt: skip
    shown = len(ids) <= 12
    c1, c2 = st.columns(2)
    where = f"query {offset} after key" if rotary else "no positions"
    c1.plotly_chart(heatmaps.matrix(
        qk.values, qk.labels, qk.labels, title=f"{chosen} QK score ({where})",
        value_name="score", x_title="key", y_title="query", show_values=shown,
    ), width="stretch", key="interp.qk")  # fmt: skip
    c2.plotly_chart(heatmaps.matrix(
        ov.values, ov.labels, ov.labels, title=f"{chosen} OV: attended → logit",
        value_name="logit change (unnormed)", x_title="logit of", y_title="attends to", show_values=shown,
    ), width="stretch", key="interp.ov")  # fmt: skip
    scores = copying_scores(ckpt)
    ranks = ", ".join(f"{t!r} {r:,}" for t, r in zip(ov.labels, ov.self_rank, strict=True))
    st.markdown(
        f"**{chosen}** raises the attended token's own logit most (among these tokens) for "
        f"**{ov.copying:.0%}** of them; its own rank among all {ckpt.n_tokens:,} tokens: {ranks}. "
        f"Eigenvalue copying score Σλ/Σ|λ| of its full OV circuit: **{scores[a, b]:.2f}** (1: pure copying)."
    )
    session.chart(
        interp.layer_head_heatmap(scores, "Copying score of every head (Σλ / Σ|λ|; click a head)", "copying",
                                  diverging=True),
        width="stretch", key="interp.copying", selection_mode=("points",),
        on_select=functools.partial(work.head_clicked, "interp.copying", "interp.circuit_head"),
    )  # fmt: skip
    work.numbers_caption(st, scores, "copying")


def composition_tab(ckpt, framework: str, scan: tuple[int, int, int]) -> None:
    """One head's composition with the heads before or after it, ranked against the random baseline."""
    L, H = ckpt.config.num_hidden_layers, ckpt.config.num_attention_heads
    (pl, ph, _), induction = _scan_heads(ckpt, framework, scan)
    names = head_names(L, H)
    c1, c2, c3 = st.columns(3)
    kind = c1.radio("Composition", ["K", "Q", "V"], horizontal=True, key="interp.comp_kind", bind=URL).lower()
    chosen = c2.selectbox(
        "Head",
        names,
        index=names.index(formats.head(induction[0][0], induction[0][1])),
        key="interp.comp_head",
        bind=URL,
    )
    side = c3.radio("Show", SIDES, horizontal=True, key="interp.comp_side", bind=URL)
    st.caption(
        qkov.KINDS[kind] + ". Score ‖W_later · W_OV‖_F / (‖W_later‖_F ‖W_OV‖_F), Elhage et al. (2021)."
    )
    a, b = parse_head(chosen)
    reads = side == SIDES[0]
    partner = (pl, ph, False)  # the previous-token head's readers: its induction heads' scores
    found = composition_rows(ckpt, kind, ((a, b, reads),) + (() if (a, b, reads) == partner else (partner,)))
    row, baseline = found[0].scores, found[0].baseline  # (L, H)
    if not np.isfinite(row).any():
        st.info(f"{chosen} has no {'earlier' if side == SIDES[0] else 'later'} heads to compose with.")
        return
    pairs = [(x, y, found[-1].scores[x, y]) for x, y, _ in induction if x > pl]
    if pairs:
        st.markdown(
            f"The scan's previous-token head **{formats.head(pl, ph)}** and its induction heads, {kind.upper()}-composition: "
            + ", ".join(f"{formats.head(x, y)} **{s:.3f}**" for x, y, s in pairs)
            + f" — against **{baseline:.3f}** for random matrices of the same shapes."
        )
    what = "reads from" if side == SIDES[0] else "is read by"
    st.plotly_chart(
        plots.composition_map(
            row, baseline, f"{chosen} {what} (red: above the random baseline)",
            range(a) if side == SIDES[0] else range(a + 1, L),
        ),
        width="stretch", key="interp.comp_map",
    )  # fmt: skip
    st.plotly_chart(
        plots.composition_bars(row, baseline, f"Strongest {kind.upper()}-composition: {chosen} {what}"),
        width="stretch", key="interp.comp_bars",
    )  # fmt: skip
    role = "previous_token" if side == SIDES[0] else "induction"  # what an induction circuit's partner does
    score = work.role_scan(ckpt, framework, *scan).scores[role]
    best = np.argsort(-np.nan_to_num(row, nan=-1.0), axis=None, kind="stable")[:3]
    circuit = " An induction head's keys read a previous-token head: the two-head induction circuit."
    st.markdown(
        f"Its strongest {side[4:]}: "
        + ", ".join(
            f"**{formats.head(i // H, i % H)}** ({role.replace('_', '-')} score {score.flat[i]:.2f})"
            for i in best
        )
        + "."
        + (circuit if kind == "k" else "")
    )
    st.download_button(
        "Download this head's scores (CSV)",
        work.grid_csv(row, f"{kind}_composition"),
        "composition.csv",
        "text/csv",
    )
    with st.expander("Every pair of heads"):
        L, H = row.shape
        st.caption(f"{(L * H) ** 2:,} cells: about {L * H} times the work of the head above, so on request.")
        label = f"Compose every pair of heads ({kind.upper()})"
        comp = work.on_request(label, "interp.comp_all", functools.partial(every_pair, ckpt, kind))
        if comp is not None:
            st.plotly_chart(plots.composition_matrix(comp.scores, comp.baseline, kind), width="stretch")
