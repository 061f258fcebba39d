"""The Training lab screen: pages/training.py and what only it uses."""
