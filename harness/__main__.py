"""``python -m harness``: the harness's own command (:mod:`harness.cli`)."""

import sys

from harness.cli import main

sys.exit(main())
