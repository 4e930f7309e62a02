"""``docs/config.md`` written from the schemas: a section per ``oml`` command that takes a config (the pipelines'
and ``oml index build``), with the table of its keys (:func:`oml_core.config.reference.markdown`). It is generated,
never edited by hand (``tests/test_config_reference.py`` fails when it differs). Rewrite it from the repository's
root::

    python -m tests.scripts.config_reference
"""

from __future__ import annotations

from pathlib import Path

from oml_core.cli.index import INDEX_BUILD_CONFIG
from oml_core.cli.pipelines import PIPELINE_CONFIGS
from oml_core.config.reference import markdown

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "config.md"
#: How ``tests/test_config_reference.py`` tells to update the page.
UPDATE_HINT = "run `python -m tests.scripts.config_reference` from the repository's root"
#: ``(command, pipeline)`` of every command that takes a config, in the order of the page.
SECTIONS = (*PIPELINE_CONFIGS.items(), ("index build", INDEX_BUILD_CONFIG))


def config_page() -> str:
    """The text of ``docs/config.md``."""
    return markdown(SECTIONS)


if __name__ == "__main__":
    PAGE.write_text(config_page(), encoding="utf-8")
    print(f"wrote {PAGE}")
