"""Tests of dedebate/lab/: runs, sweeps, reports, checkpoints, devices and compile options."""
