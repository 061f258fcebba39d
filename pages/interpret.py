"""Interpretability: what heads do — the logit lens, activation patching, a head-role scan, and the
path from the Training lab's induction head to the same circuit in a real model; then the circuits
tabs (`attnviz.app.interpret.circuits`): direct logit attribution, QK and OV circuits, composition.

Every control is bound to the URL (key = parameter name), so a link reopens the same view.
"""

import functools

import streamlit as st

from attnviz import formats, pretrained
from attnviz.app import controls
from attnviz.app.frame import door, links, session
from attnviz.app.frame.checkpoints import architecture
from attnviz.app.frame.link_values import TEXT_LIMITS
from attnviz.app.frame.shell import routed
from attnviz.app.frame.widgets import device_control
from attnviz.app.interpret import circuits as circuit_tabs
from attnviz.app.interpret import editor, fields, parts, sweep, work
from attnviz.exec import TaskError
from attnviz.frameworks import label
from attnviz.interp.roles import ROLES
from attnviz.plots import interp

routed("interpret")  # inside app.py's shell, also when Streamlit's pages/ routing ran this file alone
URL = "query-params"
TABS = [
    "Head roles",
    "Logit lens",
    "Patching",
    "Attention editor",
    "From toy to real",
    "Direct logit",
    "QK and OV",
    "Composition",
    "Score parts",
]

link = links.opened_with("interp.")  # before the widgets drop what they cannot use
st.title("Interpretability")
st.caption(
    "Attention maps show where a head looks; these tools show what it does. Every number is computed by "
    "attnviz's own model code in the framework you pick, and proven against transformers in the test suite."
)
notes_slot = st.empty()


def show_error(error: Exception) -> None:
    """A refused input, or a run that ended without a value, as the page's message."""
    if isinstance(error, TaskError):
        door.show_failure(error)
    else:
        st.error(controls.escape_markdown(str(error)), icon=":material/error:")


allowed = work.checkpoint_choices()
with st.sidebar:
    chosen_label = st.selectbox(
        "Checkpoint",
        list(allowed),
        index=work.first_decoder(list(allowed)),
        key="interp.checkpoint",
        bind=URL,
    )
    if terms := pretrained.notice(chosen_label or ""):
        st.caption(terms)  # what the model's licence requires wherever it is selected
    framework = st.radio(
        "Framework", controls.installed_frameworks(), format_func=label, horizontal=True,
        key="interp.framework", bind=URL,
    )  # fmt: skip
    device_control("interp.", framework)  # where a GPU is present; the tabs' runs read it (`work.device`)
    st.markdown("**Head-role scan** (also used by *From toy to real*)")
    half, n, seed = (int(field.number_input()) for field in (fields.HALF, fields.N, fields.SEED))
links.show(  # a link's checkpoint or framework the sidebar cannot use is said, not silently replaced
    "interp.",
    notes_slot,
    links.choices(link, "interp.checkpoint", list(allowed))
    + links.choices(link, "interp.framework", [label(f) for f in controls.installed_frameworks()]),
)  # its numbers: `link_values.guard`, before the page runs
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
    f"**{chosen_label}**{' (your Training-lab run)' if mine else ''} · {ckpt.kind} · "
    f"{architecture(ckpt.config)} · {label(framework)}"
)
if not decoder:
    st.caption(
        "The logit lens and patching read next-token logits, so they need a decoder; head roles work here."
    )


def head_roles() -> None:
    st.markdown(
        f"Each head is scored on {n} sequence{'s' * (n != 1)} of {half} random tokens, each repeated once — "
        + "; ".join(f"**{r.replace('_', ' ')}**: {d}" for r, d in ROLES.items())
        + ". A score near 1 means the head does almost only that."
    )
    scan = work.role_scan(ckpt, framework, half, n, seed)
    session.chart(
        interp.role_heatmaps(scan.scores), width="stretch", key="interp.roles", selection_mode=("points",),
        on_select=functools.partial(work.head_clicked, "interp.roles", "interp.head"),
    )  # fmt: skip
    best = {r: scan.top(r, 1)[0] for r in ROLES}
    st.markdown(
        "Strongest head per role: "
        + " · ".join(
            f"{r.replace('_', ' ')} **{formats.head(a, b)}** ({s:.2f})" for r, (a, b, s) in best.items()
        )
    )
    st.dataframe(work.scan_table(scan), hide_index=True, width="stretch", height=min(400, 36 + 35 * L * H))
    chosen = st.selectbox(
        "See a head's attention on the first sequence",
        [formats.head(a, b) for a in range(L) for b in range(H)], key="interp.head", bind=URL,
    )  # fmt: skip
    a, b = formats.parse_head(chosen)
    figure = work.head_map(scan.attentions[a, b], scan.tokens, f"{chosen} on repeated tokens", decoder)
    st.plotly_chart(figure, width="stretch", key="interp.head_map")
    st.download_button(
        "Download every head's scores (CSV)", work.scan_csv(scan), "head_roles.csv", "text/csv"
    )


def logit_lens() -> None:
    text = st.text_input(
        "Prompt",
        "The Eiffel Tower is in the city of",
        max_chars=TEXT_LIMITS["interp.text"],
        key="interp.text",
        bind=URL,
    )
    table, tokens = work.lens_table(ckpt, text, framework)
    st.caption(
        "Row *embed* is the token embedding read directly; row *after Ln* the residual stream after block n, "
        "read through the final norm and the unembedding; the last row is the model's own prediction. "
        "Hover a cell for the top 5."
    )
    st.plotly_chart(interp.lens_grid(table.probs, table.labels, tokens), width="stretch", key="interp.lens")
    st.download_button("Download the lens (CSV)", work.lens_csv(table, tokens), "logit_lens.csv", "text/csv")


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
    k = fields.K.slider(high=most)
    cmp = work.induction_ablation(ckpt, framework, half, n, seed, k)
    st.plotly_chart(
        interp.ablation_bars(cmp.baseline, cmp.top, cmp.random, k), width="stretch", key="interp.abl"
    )
    st.markdown(
        f"Loss on the repeated half: **{cmp.baseline:.3f}** nats/token with every head; **{cmp.top:.3f}** without "
        f"the top {k} induction heads ({', '.join(formats.head(a, b) for a, b in cmp.top_heads)}); "
        f"**{cmp.random_mean:.3f}** on average without {k} random heads "
        f"({min(cmp.random):.3f} … {max(cmp.random):.3f} over {len(cmp.random)} draws)."
    )


BODIES = {
    "Head roles": head_roles,
    "Logit lens": logit_lens,
    "Patching": lambda: sweep.patching_tab(ckpt, framework),
    "Attention editor": lambda: editor.editor_tab(ckpt, framework),
    "From toy to real": toy_to_real,
    "Direct logit": lambda: circuit_tabs.dla_tab(ckpt, framework),
    "QK and OV": lambda: circuit_tabs.qkov_tab(ckpt, framework, (half, n, seed)),
    "Composition": lambda: circuit_tabs.composition_tab(ckpt, framework, (half, n, seed)),
    "Score parts": lambda: parts.parts_tab(ckpt, framework, (half, n, seed)),
}
names = TABS if decoder else TABS[:1]
for title, container in zip(names, st.tabs(names, key="interp.tab", bind=URL), strict=True):
    with container:
        if container.open is False:  # only the open tab computes
            continue
        try:
            BODIES[title]()
        except (ValueError, TaskError) as error:
            show_error(error)
