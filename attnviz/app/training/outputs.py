"""What a visitor keeps of a finished run (pages/training.py draws them): its downloads, and a saved run's
links to the Pretrained and Interpretability pages."""

import streamlit as st

from attnviz.app.frame import session
from attnviz.app.frame.pages import by_name
from attnviz.app.training import state as lab
from attnviz.frameworks import label


def downloads(runs: dict) -> None:
    """History CSV, snapshots .npz and the checkpoint, each made when its button is clicked."""
    cols = st.columns(3)
    for fw, run in runs.items():
        name = f"attnviz-{run.config.task}-{fw}"
        files = [
            ("History CSV", run.history_csv, f"{name}-history.csv", "text/csv"),
            ("Snapshots .npz", run.snapshots_npz, f"{name}-snapshots.npz", "application/octet-stream"),
            ("Checkpoint .zip", run.checkpoint_zip, f"{name}.zip", "application/zip"),
        ][: 3 if run.finished else 2]  # the checkpoint needs the final weights
        for col, (text, make, file, mime) in zip(cols, files, strict=False):
            col.download_button(f"{text} ({label(fw)})", make, file, mime, key=f"training.{file}")


def pretrained_link(runs: dict) -> None:
    """Save a run for this session's Pretrained page (once) and link there."""
    for fw, run in runs.items():
        if run.saved_as is None:
            session.button(
                f"Save the {label(fw)} run for the Pretrained page", key=f"training.save.{fw}", on_click=lab.save,
                args=(run,),
            )  # fmt: skip
            continue
        st.page_link(
            by_name("pretrained").path,
            label=f"Open “{run.saved_as}” on the Pretrained page",
            icon=":material/psychology:",
            query_params={"pre.checkpoint": run.saved_as, "pre.text": " ".join(str(t) for t in run.probe[0])},
        )
        st.page_link(
            by_name("interpret").path, label=f"Scan “{run.saved_as}” on the Interpretability page",
            icon=":material/biotech:", query_params={"interp.checkpoint": run.saved_as, "interp.half": "8"},
        )  # fmt: skip
    st.caption(
        "A saved run is visible to this browser session only, on this server, until the server deletes the "
        "oldest saved runs to make room (docs/security.md)."
    )
