"""Timing: attnviz against each framework's own attention, measured on request."""

import json

import streamlit as st

from attnviz import bench, formats, settings
from attnviz.app import controls
from attnviz.app.frame import door, links, results, session
from attnviz.app.frame.shell import routed
from attnviz.app.timing import fields, sweep
from attnviz.app.timing.figures import bars_per_length, ceiling_fraction, time_vs_length, weights_memory

routed("timing")  # inside app.py's shell, also when Streamlit's pages/ routing ran this file alone
st.title("Timing")
st.caption(
    "Warm-up, then repeated calls; medians with inter-quartile ranges; the device synchronised before "
    "the clock is read; the same thread count in both frameworks; first calls (tracing, compilation) "
    "reported apart. Runs only when you press the button, in one of this server's worker processes (beside "
    "other visitors' work: a busy server measures slower times)."
)
available = controls.installed_frameworks()
choices = [name for name, impl in bench.REGISTRY.items() if impl.framework in available]
URL = {"bind": "query-params"}  # every choice is kept in the link (written when the form is submitted)
sweep.stop()  # a sweep whose run was interrupted (Stop, any widget): the rows it measured are kept
link = links.opened_with("timing.")  # before the widgets drop what they cannot use
notes = st.empty()

with st.form("timing.form"):
    impls = st.multiselect(
        "Implementations",
        choices,
        [c for c in sweep.DEFAULT_IMPLEMENTATIONS if c in choices],
        key="timing.impls",
        help="\n".join(f"- **{k}**: {v.description}" for k, v in bench.REGISTRY.items()),
        **URL,
    )
    lengths = st.pills(
        "Lengths",
        sweep.LENGTHS,
        selection_mode="multi",
        default=sweep.DEFAULT_LENGTHS,
        key="timing.lengths",
        **URL,
    )  # fmt: skip — every length visible as a chip, chosen or not
    c1, c2, c3, c4 = st.columns(4)
    heads = c1.selectbox("Heads", sweep.HEADS, 3, key="timing.heads", **URL)
    d_model = c2.selectbox("d_model", sweep.D_MODELS, 2, key="timing.d_model", **URL)
    batch = c3.selectbox("Batch", sweep.BATCHES, 0, key="timing.batch", **URL)
    dtype = c4.selectbox("dtype", settings.CHOICES["dtype"], key="timing.dtype", **URL)
    c5, c6, c7, _ = st.columns(4)
    mask = c5.selectbox("Mask", sweep.MASKS, key="timing.mask", **URL)
    gpu = all(controls.gpu_known(fw) for fw in available)  # asked of the workers; CPU until they answer
    device = c6.selectbox(
        "Device",
        ["cpu", "gpu"] if gpu else ["cpu"],
        key="timing.device",
        help=None if gpu else "No GPU is visible to the workers (or they have not answered yet): CPU only.",
        **URL,
    )
    repeats = fields.REPEATS.number_input(c7)
    session.submit("Run benchmark", key="timing.run", type="primary", on_click=sweep.request)
links.show("timing.", notes, sweep.link_notes(link, choices, ["cpu", "gpu"] if gpu else ["cpu"]))


if st.session_state.pop("timing.requested", False):
    cases = [bench.Case(batch, n, heads, d_model, dtype, mask) for n in sorted(lengths or [])]
    need = settings.sweep_need(cases)
    if not impls or not lengths:
        st.error("Choose at least one implementation and one length.")
    elif need > results.SWEEP_BYTES:
        st.error(
            f"This sweep needs about {formats.size(need)} at its largest case, over this server's "
            f"sweep budget of {formats.size(results.SWEEP_BYTES)} (ATTNVIZ_SWEEP_MB); allowed: shorter "
            "lengths, fewer heads, a smaller batch or d_model, or float32.",
            icon=":material/memory:",
        )
    else:
        sweep.run(cases, impls, device, int(repeats))

if sweep.FAILURE in st.session_state:
    door.show_failure(st.session_state[sweep.FAILURE], key="timing.again", on_again=sweep.request)
result = st.session_state.get(sweep.RESULT)
if not result or not result["rows"]:
    st.info(sweep.promise())
    st.stop()

meta, rows = result["meta"], result["rows"]
st.markdown(
    f"**{len(rows)} measurements** on {meta.get('processor') or meta.get('machine')} "
    f"({meta.get('cpu_count')} cores), device {meta.get('device')}; versions "
    + ", ".join(f"{k} {v}" for k, v in meta.get("versions", {}).items())
    + "; matmul ceiling "
    + ", ".join(f"{k} {v:.1f} GFLOP/s" for k, v in meta.get("matmul_ceiling_gflops_per_s", {}).items())
    + ". "
    + sweep.duration_sentence(meta, len(rows))
)
st.markdown(sweep.threads_sentence(meta))
errors = [r for r in rows if r.get("error")]
for r in errors:
    st.warning(
        f"{r['implementation']} at length {r['length']} did not run: {controls.escape_markdown(r['error'])}"
    )
if meta.get("threads_match", True):  # a comparison only where the thread counts match
    st.plotly_chart(time_vs_length(rows), width="stretch", key="timing.loglog")
    st.plotly_chart(bars_per_length(rows), width="stretch", key="timing.bars")
    left, right = st.columns(2)
    left.plotly_chart(ceiling_fraction(rows), width="stretch", key="timing.ceiling")
    right.plotly_chart(weights_memory(rows), width="stretch", key="timing.memory")
st.dataframe(
    [
        {
            k: r.get(k)
            for k in (
                "implementation",
                "length",
                "first_call_s",
                "median_s",
                "iqr_s",
                "gflops_per_s",
                "fraction_of_ceiling",
                "weights_bytes",
                "threads",
                "version",
                "device_name",
            )
        }
        for r in rows
    ],
    hide_index=True,
    width="stretch",
)
d1, d2 = st.columns(2)
d1.download_button(
    "⬇ Results (JSON)",
    json.dumps(result, indent=2),
    "attnviz-bench.json",
    "application/json",
    on_click="ignore",
)
d2.download_button(
    "⬇ Results (CSV)", bench.to_csv(result), "attnviz-bench.csv", "text/csv", on_click="ignore"
)
