"""Tests of dedebate/machines/: step programs, fixtures, oracles, Lipschitz constants."""
