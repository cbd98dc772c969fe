"""``python -m pgcdc_events.cli``: the ``pgcdc-events`` command."""

import sys

from pgcdc_events.cli import main

sys.exit(main())
