"""The Training lab screen: page.py and what only it uses."""
