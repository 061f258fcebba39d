"""The Pretrained model screen: page.py and what only it uses."""
