"""The Home screen: page.py and what only it uses."""
