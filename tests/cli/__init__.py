"""Tests of dedebate/cli/: the command line in subprocesses."""
