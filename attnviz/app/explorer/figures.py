"""The explorer's figures kept between reruns: a rerun that draws the same heads (the same
configuration's run, batch item and view: a click on a panel, a head enlarged, Streamlit's R) reuses
the figure instead of building it again.

Building the heads' figure is half of a rerun's script time in the server (plotly validates every
property it sets: 0.51 s of a 1.01 s rerun at the default configuration, medians of 15 AppTest reruns
at load 23; docs/performance.md). Figures are kept in their own byte-bounded cache, shared by the
sessions (a figure is only read: `st.plotly_chart` serialises a copy), for a few minutes without use.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import plotly.graph_objects as go

from attnviz.cache import MIB, ByteCache

FIGURES = ByteCache(64 * MIB, ttl=300)


def kept(key: Hashable, build: Callable[[], go.Figure]) -> go.Figure:
    """The figure `build()` returns, built once per `key` while it is kept (`key` must name everything
    the figure is drawn from: the run's cache key, the batch item, the view's choices)."""
    return FIGURES.get_or_build(key, build)
