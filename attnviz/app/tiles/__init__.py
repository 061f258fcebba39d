"""The FlashAttention tiles screen: pages/tiles.py and what only it uses."""
