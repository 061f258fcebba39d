"""The Decoding screen: a generation stepped through token by token over its KV cache (pages/decoding.py), its
checks and text (work.py) and the figures only it draws (figures.py)."""
