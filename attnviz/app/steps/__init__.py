"""The Step by step screen: page.py and what only it uses."""
