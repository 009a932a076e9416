"""Hostile inputs: shared reports and run folders from someone else."""
