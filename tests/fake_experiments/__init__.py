"""Fake experiment modules for the lab-shell tests (the real ones live in ``experiments/``)."""
