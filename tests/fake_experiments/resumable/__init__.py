"""A fake experiment package with a checkpointed, resumable run (kept apart from the others so the
reproduce tests see exactly fake_pass, fake_fail and fake_raise)."""
