"""A benchmark worker for tests (``bench/_worker.py``): prints a line, then its arguments and
``$DEDEBATE_TEST_MARK`` as JSON; with ``--fail`` it exits with an error instead."""

import json
import os
import sys

if __name__ == "__main__":
    if sys.argv[1:2] == ["--fail"]:
        sys.exit("the worker failed on purpose")
    print("a line before the result")
    print(json.dumps({"args": sys.argv[1:], "mark": os.environ.get("DEDEBATE_TEST_MARK")}))
