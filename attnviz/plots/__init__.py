"""Figure builders: NumPy in, `plotly.graph_objects.Figure` out. No Streamlit, no framework.

Import the module you need (`from attnviz.plots import heatmaps`); this package imports nothing.
`heatmaps` draws attention maps, `tokens` bertviz-style token views, `bench` a timing sweep;
`labels`, `cells` and `blocked` hold what they share (tick labels, sizes, the blocked-cell look).
"""
