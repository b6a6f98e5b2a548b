"""Frontends: turning captured PyTorch programs into thunderlab traces."""
