"""The Compare-models screen: two decoders on the same prompt, side by side (page.py), its checks and
text (work.py) and the figures only it draws (figures.py)."""
