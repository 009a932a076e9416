"""Tests of dedebate/protocols/: every debate protocol, exact and sampled."""
