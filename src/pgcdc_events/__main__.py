"""``python -m pgcdc_events``: the command line."""

from pgcdc_events.cli import main

raise SystemExit(main())
