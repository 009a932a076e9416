"""Tests of dedebate/training/: Stackelberg and stochastic self-play."""
