"""Fake sweepable experiments (kept apart so the reproduce tests see exactly the others)."""
