"""The Timing screen: pages/timing.py and what only it uses."""
