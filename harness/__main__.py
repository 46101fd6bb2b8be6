"""``python -m harness [-m] [overrides]``: see harness/app/__init__.py."""

import sys

from harness.app.main import main

if __name__ == "__main__":
    sys.exit(main())
