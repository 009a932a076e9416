"""A helper module without NAME: discovery must skip it (NAME without report is an error)."""

VALUE = 1
