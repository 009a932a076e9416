"""Tests of experiments/: each experiment's config, quick run, sweep, resume and rows."""
