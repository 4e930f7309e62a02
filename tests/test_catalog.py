"""The first-party name catalog (used only for error hints) matches what the plugins really register."""

from oml_core.registry import Registry
from oml_core.registry.catalog import FIRST_PARTY_PROVIDERS

FIRST_PARTY = {
    "oml_models",
    "oml_losses",
    "oml_samplers",
    "oml_loggers",
    "oml_postprocessors",
    "oml_pml",
    "oml_faiss",
}


def test_catalog_matches_the_installed_first_party_plugins():
    registry = Registry(allow=FIRST_PARTY)
    registered = {
        (kind, name): record.info.distribution
        for record in registry.plugins()
        if record.info.name in FIRST_PARTY
        for kind, names in registry.provided_by(record.info.name).items()
        for name in names
    }
    assert registered == dict(FIRST_PARTY_PROVIDERS)
