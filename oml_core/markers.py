"""The pluggy markers of the ``oml`` project (also the entry-point group plugins declare)."""

import pluggy

PROJECT_NAME = "oml"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
