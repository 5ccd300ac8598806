"""``python -m controller`` is the ``bindery`` command."""

import sys

from controller.cli.main import main

sys.exit(main())
