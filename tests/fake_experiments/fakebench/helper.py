"""A helper module of the fake bench package: no ``run``, so not a benchmark."""

SCALE = 2
