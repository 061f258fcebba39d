"""The Timing screen: page.py and what only it uses."""
