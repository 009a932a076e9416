"""A fake experiments package of two slow experiments that mark when they start and finish (in
``$DEDEBATE_TEST_MARK_DIR``), for stopping a ``reproduce --jobs 2`` in the middle."""
