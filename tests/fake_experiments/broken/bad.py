"""Fails at import time, like an experiment with a missing dependency."""

raise ImportError("no module named 'imaginary_dependency'")
