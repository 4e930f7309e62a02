"""``oml --version``: the versions of oml-core and of the installed plugin distributions
(:func:`~oml_core.reports.version.versions`, read from their metadata: no plugin is imported)."""

from __future__ import annotations

import argparse

from oml_core.registry.manager import allow_list_from_env
from oml_core.reports.version import versions


def run(_: argparse.Namespace, __: list[str]) -> int:
    """Print ``oml-core <version>`` and a line ``<distribution> <version>`` per plugin distribution that
    ``OML_LOAD_PLUGINS`` admits."""
    print(versions(allow_list_from_env()).as_text())
    return 0


__all__ = ["run"]
