"""`python -m ktrace` runs the command line."""

from __future__ import annotations

from ktrace.cli import main

raise SystemExit(main())
