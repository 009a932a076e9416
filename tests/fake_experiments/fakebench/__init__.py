"""A fake ``bench`` package for the CLI tests
(``DEDEBATE_BENCH=tests.fake_experiments.fakebench``)."""
