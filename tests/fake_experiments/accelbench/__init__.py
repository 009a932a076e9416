"""Fake benchmarks for the accelerator script's test (``tests/test_accelerator_script.py``)."""
