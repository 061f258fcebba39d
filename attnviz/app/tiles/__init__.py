"""The FlashAttention tiles screen: page.py and what only it uses."""
