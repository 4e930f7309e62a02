"""``python -m oml_core.cli ARGS``: the ``oml`` console script (:func:`oml_core.cli.main`)."""

import sys

from oml_core.cli import main

sys.exit(main())
