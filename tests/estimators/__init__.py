"""Tests of dedebate/estimators/: test families, Algorithm 1 (OGD), the network estimator."""
