"""The Lesson screen: page.py and what only it uses."""
