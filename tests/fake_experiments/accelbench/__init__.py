"""Fake benchmarks for the accelerator script's test, ``tests/bench/test_accelerator_script.py``."""
