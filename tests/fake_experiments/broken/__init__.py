"""A fake experiments package in which one module fails to import."""
