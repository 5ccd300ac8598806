"""``python -m controller`` is the ``bindery`` command."""

import sys

from controller.cli import main

sys.exit(main())
