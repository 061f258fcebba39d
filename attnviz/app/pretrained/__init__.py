"""The Pretrained model screen: pages/pretrained.py and what only it uses."""
