"""Figures of a benchmark result (`attnviz.bench`): rows in, plotly figures out.

One colour per implementation in every figure (`colour`): the line chart, the bars and the
ceiling chart read alike (issue 33).
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from attnviz.bench import REGISTRY

# Plotly's qualitative "Dark24" minus its lightest and greys: one colour for each registered implementation.
PALETTE = (
    "#2E91E5", "#E15F99", "#1CA71C", "#FB0D0D", "#DA16FF", "#B68100", "#750D86", "#EB663B",
    "#511CFB", "#00A08B", "#FB00D1", "#FC0080", "#0D2A63", "#AF0038", "#6C7C32", "#862A16",
)  # fmt: skip
COLOURS = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(REGISTRY)}


def colour(implementation: str) -> str:
    """The implementation's colour, the same in every figure (an unknown name gets grey)."""
    return COLOURS.get(implementation, "#616161")


def _ok(rows: list[dict]) -> list[dict]:
    return [r for r in rows if not r.get("error") and r.get("median_s")]


def _by_impl(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in sorted(_ok(rows), key=lambda r: r["length"]):
        out.setdefault(r["implementation"], []).append(r)
    return out


def log_ticks(values) -> dict:
    """Axis settings for a log axis over `values`: labelled ticks at every decade (1, 10,
    100 …), plus 2 and 5 times a decade when the data span less than two decades, and 1.5, 3 and 7
    as well when they span less than one (times from 1.1 to 3 ms were labelled only "1" and "2");
    unlabelled minor ticks between. Plotly's own log ticks label 2 … 9 as well and stack them."""
    values = [v for v in values if v and v > 0]
    if not values:
        return {}
    lo, hi = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    span = math.log10(max(values) / min(values))
    steps = (1, 1.5, 2, 3, 5, 7) if span < 1 else (1, 2, 5) if span < 2 else (1,)
    ticks = [
        m * 10.0**e
        for e in range(lo, hi + 1)
        for m in steps
        if min(values) / 1.5 <= m * 10.0**e <= max(values) * 1.5
    ]
    return {
        "tickmode": "array",
        "tickvals": ticks,
        "ticktext": [f"{t:,.10g}" for t in ticks],
        "ticks": "outside",  # labels stand clear of the minor ticks
        "ticklen": 6,
        "minor": {"ticks": "outside", "ticklen": 3, "dtick": "D1", "showgrid": False},
    }


def length_ticks(lengths) -> dict:
    """A log axis of sequence lengths labelled at the lengths measured (64, 128, 256 …)."""
    shown = sorted(set(lengths))
    return {"tickmode": "array", "tickvals": shown, "ticktext": [str(n) for n in shown]}


def fitted_slope(lengths, times) -> float | None:
    """Slope of log(time) against log(length): 2 = quadratic growth."""
    if len(set(lengths)) < 2:
        return None
    return float(np.polyfit(np.log(lengths), np.log(times), 1)[0])


def time_vs_length(rows: list[dict]) -> go.Figure:
    """Median time against length on log-log axes, IQR as error bars, fitted slope in the legend."""
    fig = go.Figure()
    all_lengths, all_times = [], []
    for name, rs in _by_impl(rows).items():
        lengths, med = [r["length"] for r in rs], [r["median_s"] * 1e3 for r in rs]
        all_lengths += lengths
        all_times += [r["p25_s"] * 1e3 for r in rs] + [r["p75_s"] * 1e3 for r in rs] + med
        slope = fitted_slope(lengths, med)
        fig.add_trace(
            go.Scatter(
                x=lengths,
                y=med,
                mode="lines+markers",
                name=name + (f" (slope {slope:.2f})" if slope is not None else ""),
                line={"color": colour(name)},
                marker={"color": colour(name)},
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [(r["p75_s"] - r["median_s"]) * 1e3 for r in rs],
                    "arrayminus": [(r["median_s"] - r["p25_s"]) * 1e3 for r in rs],
                },
            )
        )
    fig.update_xaxes(type="log", title="sequence length", **length_ticks(all_lengths))
    fig.update_yaxes(type="log", title="median time (ms)", **log_ticks(all_times))
    fig.update_layout(
        title="Time vs length, log-log — slope 1: linear, 2: quadratic",
        height=460,
    )
    return fig


def bars_per_length(rows: list[dict]) -> go.Figure:
    """One bar chart per length across implementations, IQR as error bars; each implementation
    one colour (one trace across the panels, one legend entry)."""
    ok = _ok(rows)
    lengths = sorted({r["length"] for r in ok})
    fig = make_subplots(rows=1, cols=max(1, len(lengths)), subplot_titles=[f"length {n}" for n in lengths])
    for name, rs in _by_impl(rows).items():
        for r in rs:
            fig.add_trace(
                go.Bar(
                    x=[name],
                    y=[r["median_s"] * 1e3],
                    name=name,
                    legendgroup=name,
                    showlegend=r is rs[0],
                    marker={"color": colour(name)},
                    error_y={
                        "type": "data",
                        "symmetric": False,
                        "array": [(r["p75_s"] - r["median_s"]) * 1e3],
                        "arrayminus": [(r["median_s"] - r["p25_s"]) * 1e3],
                    },
                    hovertemplate="%{x}<br>median %{y:.3f} ms<extra></extra>",
                ),
                row=1,
                col=lengths.index(r["length"]) + 1,
            )
    fig.update_yaxes(title_text="median time (ms)", col=1)
    # The legend names each bar's colour; rotated names under narrow bars ran into it and were cut off.
    fig.update_xaxes(showticklabels=False)
    fig.update_layout(
        title="Median time per implementation (bars: IQR)",
        height=460,
        barmode="overlay",  # one bar per implementation and length: each at its own category
        legend={"orientation": "h", "y": -0.08, "yanchor": "top"},
    )
    return fig


def ceiling_fraction(rows: list[dict]) -> go.Figure:
    """Achieved GFLOP/s as a fraction of the matmul ceiling measured in the same run.

    A row measured above the ceiling (`noisy`, its fraction None) is never drawn above
    100 %: it is marked ✕ at the 100 % line, in a legend entry that says why.
    """
    fig = go.Figure()
    lengths, noisy = [], []
    for name, rs in _by_impl(rows).items():
        lengths += [r["length"] for r in rs]
        noisy += [(name, r) for r in rs if r.get("noisy") or (r.get("fraction_of_ceiling") or 0) > 1]
        fig.add_trace(
            go.Scatter(
                x=[r["length"] for r in rs],
                y=[_fraction(r) for r in rs],
                mode="lines+markers",
                name=name,
                line={"color": colour(name)},
                marker={"color": colour(name)},
                customdata=[[r["gflops_per_s"], r["ceiling_gflops_per_s"]] for r in rs],
                hovertemplate="length %{x}<br>%{y:.0%} of ceiling<br>%{customdata[0]:.1f} of "
                "%{customdata[1]:.1f} GFLOP/s<extra></extra>",
            )
        )
    if noisy:
        fig.add_trace(
            go.Scatter(
                x=[r["length"] for _, r in noisy],
                y=[1.0] * len(noisy),
                mode="markers",
                marker={"symbol": "x", "size": 10, "color": "#616161"},
                name="noisy run: measured above the ceiling",
                text=[name for name, _ in noisy],
                hovertemplate="%{text}, length %{x}: measured above the ceiling — a noisy run, "
                "not a real fraction<extra></extra>",
            )
        )
    fig.update_xaxes(type="log", title="sequence length", **length_ticks(lengths))
    fig.update_yaxes(title="fraction of the matmul ceiling", tickformat=".0%", range=[0, 1.05])
    fig.update_layout(title="GFLOP/s as a fraction of the measured matmul ceiling", height=420)
    return fig


def _fraction(row: dict) -> float | None:
    """The row's fraction of the ceiling; None (a gap) for a noisy row measured above it."""
    fraction = row.get("fraction_of_ceiling")
    return None if row.get("noisy") or fraction is None or fraction > 1 else fraction


def weights_memory(rows: list[dict]) -> go.Figure:
    """Bytes the attention weights occupy, per configuration."""
    seen = {}
    for r in rows:
        key = f"B{r['batch']}·H{r['heads']}·L{r['length']}·{r['dtype']}"
        seen[key] = r["weights_bytes"] / 2**20
    fig = go.Figure(
        go.Bar(x=list(seen), y=list(seen.values()), hovertemplate="%{x}<br>%{y:.2f} MiB<extra></extra>")
    )
    fig.update_layout(title="Memory of the attention weights (B·H·L² values)", yaxis_title="MiB", height=380)
    return fig
