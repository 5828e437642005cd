"""``python -m exporter`` runs the ``podresources-exporter`` command."""

import sys

from .cli import main

sys.exit(main())
