"""Interpretability: what heads do — the logit lens, activation patching, a head-role scan, and the
path from the Training lab's induction head to the same circuit in a real model; then the circuits
tabs (`attnviz.app.interpret.circuits`): direct logit attribution, QK and OV circuits, composition.

Every control is bound to the URL (key = parameter name), so a link reopens the same view.
"""

import functools

import numpy as np
import streamlit as st

from attnviz import pretrained
from attnviz.app import controls
from attnviz.app.frame.literal import count
from attnviz.app.interpret import circuits as circuit_tabs
from attnviz.app.interpret import work
from attnviz.frameworks import label
from attnviz.interp.roles import ROLES
from attnviz.plots import interp

URL = "query-params"
TABS = [
    "Head roles",
    "Logit lens",
    "Patching",
    "From toy to real",
    "Direct logit",
    "QK and OV",
    "Composition",
]

st.title("Interpretability")
st.caption(
    "Attention maps show where a head looks; these tools show what it does. Every number is computed by "
    "attnviz's own model code in the framework you pick, and proven against transformers in the test suite."
)


def show_error(error: ValueError) -> None:
    st.error(controls.escape_markdown(str(error)), icon=":material/error:")


allowed = work.checkpoint_choices()
with st.sidebar:
    chosen_label = st.selectbox("Checkpoint", list(allowed), key="interp.checkpoint", bind=URL)
    if terms := pretrained.notice(chosen_label or ""):
        st.caption(terms)  # what the model's licence requires wherever it is selected
    framework = st.radio(
        "Framework", controls.installed_frameworks(), format_func=label, horizontal=True,
        key="interp.framework", bind=URL,
    )  # fmt: skip
    st.markdown("**Head-role scan** (also used by *From toy to real*)")
    half = int(st.number_input("Random tokens per half", 2, 64, 16, key="interp.half", bind=URL))
    n = int(st.number_input("Sequences", 1, 8, 4, key="interp.n", bind=URL))
    seed = int(st.number_input("Seed", 0, 10_000, 0, key="interp.seed", bind=URL))
name = allowed.get(chosen_label)  # the checkpoint's name, or the folder of this session's saved run
if not name:
    st.info("No checkpoint is available here; the Pretrained page says how to add one.")
    st.stop()
try:
    ckpt = work.open_checkpoint(name)
except ValueError as error:
    show_error(error)
    st.stop()
decoder = ckpt.kind == "decoder"
L, H = ckpt.config.num_hidden_layers, ckpt.config.num_attention_heads
mine = name != chosen_label  # a folder: this session's own Training-lab run
st.markdown(
    f"**{chosen_label}**{' (your Training-lab run)' if mine else ''} · {ckpt.kind} · {count(L, 'layer')} × {count(H, 'head')} · {label(framework)}"
)
if not decoder:
    st.caption(
        "The logit lens and patching read next-token logits, so they need a decoder; head roles work here."
    )


def head_roles() -> None:
    st.markdown(
        f"Each head is scored on {n} sequences of {half} random tokens, each repeated once — "
        + "; ".join(f"**{r.replace('_', ' ')}**: {d}" for r, d in ROLES.items())
        + ". A score near 1 means the head does almost only that."
    )
    scan = work.role_scan(name, framework, half, n, seed)
    st.plotly_chart(
        interp.role_heatmaps(scan.scores), width="stretch", key="interp.roles", selection_mode=("points",),
        on_select=functools.partial(work.head_clicked, "interp.roles", "interp.head"),
    )  # fmt: skip
    best = {r: scan.top(r, 1)[0] for r in ROLES}
    st.markdown(
        "Strongest head per role: "
        + " · ".join(f"{r.replace('_', ' ')} **L{a}.H{b}** ({s:.2f})" for r, (a, b, s) in best.items())
    )
    st.dataframe(work.scan_table(scan), hide_index=True, width="stretch", height=min(400, 36 + 35 * L * H))
    chosen = st.selectbox(
        "See a head's attention on the first sequence",
        [f"L{a}.H{b}" for a in range(L) for b in range(H)], key="interp.head", bind=URL,
    )  # fmt: skip
    a, b = (int(part[1:]) for part in chosen.split("."))
    figure = work.head_map(scan.attentions[a, b], scan.tokens, f"{chosen} on repeated tokens", decoder)
    st.plotly_chart(figure, width="stretch", key="interp.head_map")
    st.download_button(
        "Download every head's scores (CSV)", work.scan_csv(scan), "head_roles.csv", "text/csv"
    )


def logit_lens() -> None:
    text = st.text_input(
        "Prompt", "The Eiffel Tower is in the city of", max_chars=500, key="interp.text", bind=URL
    )
    table, tokens = work.lens_table(name, text, framework)
    st.caption(
        "Row *embed* is the token embedding read directly; row *after Ln* the residual stream after block n, "
        "read through the final norm and the unembedding; the last row is the model's own prediction. "
        "Hover a cell for the top 5."
    )
    st.plotly_chart(interp.lens_grid(table.probs, table.labels, tokens), width="stretch", key="interp.lens")
    st.download_button("Download the lens (CSV)", work.lens_csv(table, tokens), "logit_lens.csv", "text/csv")


def patching() -> None:
    st.markdown(
        "Run a **clean** prompt and a **corrupted** one with the same number of tokens; then rerun the corrupted "
        "prompt with one head's output taken from the clean run, head by head. Each cell is the share of the "
        "clean − corrupted logit difference (answer − wrong token, last position) that head restores."
    )
    c1, c2 = st.columns(2)
    clean = c1.text_input("Clean prompt", work.CLEAN, key="interp.clean", bind=URL)
    corrupted = c2.text_input("Corrupted prompt", work.CORRUPTED, key="interp.corrupted", bind=URL)
    answer = c1.text_input("Answer token", work.ANSWER, key="interp.answer", bind=URL)
    wrong = c2.text_input("Wrong token", work.WRONG, key="interp.wrong", bind=URL)
    prompts = (clean, corrupted, answer, wrong)
    work.check_prompts(ckpt, prompts)
    st.caption(f"A sweep runs the model {L * H} times. Changing a field, or leaving the page, stops it.")
    st.button("Run the patching sweep", key="interp.run_sweep", type="primary", on_click=work.request_sweep)
    if work.sweep_requested():
        bar = st.progress(0.0, "Patching…")
        result = work.patching_sweep(
            name, framework, prompts, lambda d, t: bar.progress(d / t, f"Head {d} of {t}…")
        )
        work.keep_sweep((name, framework, prompts), result)
    result = work.kept_sweep((name, framework, prompts))
    if result is None:
        return
    st.markdown(
        f"Logit difference {result.answer!r} − {result.wrong!r}: clean **{result.clean_diff:.3f}**, "
        f"corrupted **{result.corrupted_diff:.3f}**."
    )
    st.plotly_chart(
        interp.patching_heatmap(result.restored), width="stretch", key="interp.patching",
        selection_mode=("points",), on_select=functools.partial(work.head_clicked, "interp.patching", "interp.patch_head"),
    )  # fmt: skip
    a, b = np.unravel_index(np.nanargmax(result.restored), result.restored.shape)
    st.markdown(f"Most restoring head: **L{a}.H{b}** ({result.restored[a, b]:.2f} of the difference).")
    heads = [f"L{x}.H{y}" for x in range(L) for y in range(H)]
    chosen = st.selectbox(
        "Its attention on both prompts (or click a head above)", heads, index=int(a * H + b),
        key="interp.patch_head", bind=URL,
    )  # fmt: skip
    a, b = (int(part[1:]) for part in chosen.split("."))
    for prompt, column in zip((clean, corrupted), st.columns(2), strict=True):
        attn, tokens = work.attention_on(name, prompt, framework, a, b)
        column.plotly_chart(work.head_map(attn, tokens, f"{chosen}: {prompt[:28]}", True), width="stretch")
    st.download_button(
        "Download (CSV)", work.grid_csv(result.restored, "restored"), "patching.csv", "text/csv"
    )


def toy_to_real() -> None:
    st.markdown(
        "1. In the **Training lab**, train the *induction* task and save it for the Pretrained page; it then "
        "appears in this page's checkpoint list.\n"
        "2. Pick it here: **Head roles** shows a head of its second layer with an induction score near 1.\n"
        "3. Pick **SmolLM2-135M-Instruct**: the same scan finds its induction heads among 270.\n"
        "4. Below: ablate the top-k induction heads, then k random heads, and compare the loss on the repeated "
        "half. If the scan found the circuit, only the first makes the model forget the repeat."
    )
    most = max(1, min(16, L * H // 2))
    k = st.slider("Heads to ablate (k)", 1, most, min(3, most), key="interp.k", bind=URL)
    cmp = work.induction_ablation(name, framework, half, n, seed, k)
    st.plotly_chart(
        interp.ablation_bars(cmp.baseline, cmp.top, cmp.random, k), width="stretch", key="interp.abl"
    )
    st.markdown(
        f"Loss on the repeated half: **{cmp.baseline:.3f}** nats/token with every head; **{cmp.top:.3f}** without "
        f"the top {k} induction heads ({', '.join(f'L{a}.H{b}' for a, b in cmp.top_heads)}); "
        f"**{cmp.random_mean:.3f}** on average without {k} random heads "
        f"({min(cmp.random):.3f} … {max(cmp.random):.3f} over {len(cmp.random)} draws)."
    )


BODIES = {
    "Head roles": head_roles,
    "Logit lens": logit_lens,
    "Patching": patching,
    "From toy to real": toy_to_real,
    "Direct logit": lambda: circuit_tabs.dla_tab(ckpt, name, framework),
    "QK and OV": lambda: circuit_tabs.qkov_tab(ckpt, name, framework, (half, n, seed)),
    "Composition": lambda: circuit_tabs.composition_tab(ckpt, name, framework, (half, n, seed)),
}
names = TABS if decoder else TABS[:1]
for title, container in zip(names, st.tabs(names, key="interp.tab", bind=URL), strict=True):
    with container:
        if container.open is False:  # only the open tab computes
            continue
        try:
            BODIES[title]()
        except ValueError as error:
            show_error(error)
