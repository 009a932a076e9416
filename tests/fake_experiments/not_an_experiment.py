"""A helper module without NAME/run: discovery must skip it."""

VALUE = 1
