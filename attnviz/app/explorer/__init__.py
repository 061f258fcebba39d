"""The Multi-head explorer screen: pages/explorer.py and what only it uses."""
