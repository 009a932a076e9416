"""Tests of dedebate/core/: bits, binomial counts, simplex projection, statistics."""
