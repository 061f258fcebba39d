"""The Compare-models screen: two decoders on the same prompt, side by side (pages/models.py), its checks and
text (work.py) and the figures only it draws (figures.py)."""
