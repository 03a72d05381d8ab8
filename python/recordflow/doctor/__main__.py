"""``python -m recordflow.doctor GLOB... [options]``: as `recordflow doctor`."""

import sys

from recordflow.doctor.cli import main

sys.exit(main())
