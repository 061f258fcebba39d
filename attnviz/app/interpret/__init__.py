"""The Interpretability screen: pages/interpret.py and what only it uses."""
