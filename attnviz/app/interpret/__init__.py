"""The Interpretability screen: page.py and what only it uses."""
