"""``python -m dedebate.cli``: the ``dedebate`` command."""

import sys

from dedebate.cli import main

if __name__ == "__main__":
    sys.exit(main())
