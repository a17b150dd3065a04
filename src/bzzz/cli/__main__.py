"""``python -m bzzz.cli``: the `bzzz` command."""

from bzzz.cli import main

raise SystemExit(main())
