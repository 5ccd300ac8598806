"""``python -m controller.mcp serve``: see :mod:`controller.mcp.cli`."""

import sys

from controller.mcp.cli import main

sys.exit(main())
