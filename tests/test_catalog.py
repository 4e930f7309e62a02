"""The first-party name catalog (used only for error hints) is generated from the plugins' tables, and matches what
the installed first-party plugins really register."""

from __future__ import annotations

import pytest

from oml_core.registry import Registry
from oml_core.registry.catalog import FIRST_PARTY_PROVIDERS
from oml_core.utils.lazy import Component
from tests.scripts.first_party_catalog import (
    CATALOG,
    UPDATE_HINT,
    catalog_rows,
    catalog_source,
    first_party_catalog,
    first_party_plugins,
)


def test_the_catalog_is_what_the_plugins_tables_make() -> None:
    rows = first_party_catalog()
    if CATALOG.read_text(encoding="utf-8") != catalog_source(rows):
        added = sorted(rows.keys() - FIRST_PARTY_PROVIDERS.keys())
        removed = sorted(FIRST_PARTY_PROVIDERS.keys() - rows.keys())
        pytest.fail(
            f"oml_core/registry/catalog.py is out of date (new: {added}, gone: {removed}): {UPDATE_HINT}"
        )


def test_the_catalog_matches_the_installed_first_party_plugins() -> None:
    first_party = {plugin.entry_point for plugin in first_party_plugins()}
    registry = Registry(allow=first_party)
    registered = {
        (kind, name): record.info.distribution
        for record in registry.plugins()
        if record.info.name in first_party
        for kind, names in registry.provided_by(record.info.name).items()
        for name in names
    }
    assert registered == dict(FIRST_PARTY_PROVIDERS)


def test_catalog_rows_are_ordered_and_refuse_a_name_of_two_distributions() -> None:
    losses = (Component("loss", "b", "pkg_b:B", "b"), Component("loss", "a", "pkg_b:A", "a"))
    miners = (Component("miner", "a", "pkg_a:A", "a"),)
    assert list(catalog_rows({"pkg-b": losses, "pkg-a": miners}).items()) == [
        (("miner", "a"), "pkg-a"),
        (("loss", "a"), "pkg-b"),
        (("loss", "b"), "pkg-b"),
    ]
    assert catalog_source({("miner", "a"): "pkg-a"}).endswith(
        '    {\n        ("miner", "a"): "pkg-a",\n    }\n)\n'
    )
    with pytest.raises(ValueError, match="loss 'a' is in the tables of pkg-b and pkg-c"):
        catalog_rows({"pkg-b": losses, "pkg-c": (Component("loss", "a", "pkg_c:A", "a"),)})
