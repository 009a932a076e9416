"""A fake benchmark that outlasts any timeout the test gives it."""

import time


def run(full: bool = False) -> dict:
    time.sleep(120)
    return {"name": "sleepy"}
