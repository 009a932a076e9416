"""Tests of bench/: the benchmarks' references, timing and scripts."""
