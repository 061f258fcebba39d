"""The PyTorch vs TensorFlow screen: page.py and what only it uses."""
