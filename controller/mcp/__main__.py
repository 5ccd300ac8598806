"""``python -m controller.mcp serve``: see :mod:`controller.mcp.cli`."""

import sys

from controller.mcp.cli import main

if __name__ == "__main__":
    sys.exit(main())
