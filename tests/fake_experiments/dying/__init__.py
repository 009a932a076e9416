"""A fake experiments package whose first experiment kills its own process (a worker of
``dedebate reproduce --jobs``; never run it in the test process) and a second one that passes."""
