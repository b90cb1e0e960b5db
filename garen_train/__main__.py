"""``python -m garen_train ...`` is ``garen-train ...``."""

import sys

from garen_train.cli import main

if __name__ == "__main__":
    sys.exit(main())
