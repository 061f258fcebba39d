"""The Multi-head explorer screen: page.py and what only it uses."""
