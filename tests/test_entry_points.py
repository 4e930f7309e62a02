"""Real entry-point discovery through installed distributions, run as the ``oml`` command."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from oml_core.registry.catalog import FIRST_PARTY_PROVIDERS
from tests.scripts.fake_plugins import fake_distribution


def _expected_provides() -> dict[str, dict[str, list[str]]]:
    """``{plugin: {kind: sorted names}}`` of the first-party plugins (from the catalog, which
    ``test_catalog.py`` checks against the registry) and of the example plugin."""
    provides: dict[str, dict[str, list[str]]] = defaultdict(dict)
    for (kind, name), distribution in FIRST_PARTY_PROVIDERS.items():
        provides[distribution.replace("-", "_")].setdefault(kind, []).append(name)
    for names in (names for kinds in provides.values() for names in kinds.values()):
        names.sort()
    provides["oml_plugin_example"] = {"extractor": ["tiny_conv"], "loss": ["contrastive_example"]}
    return dict(provides)


EXPECTED_PROVIDES = _expected_provides()


def _report(result) -> dict[str, dict]:
    assert result.returncode == 0, result.stderr
    return {row["name"]: row for row in json.loads(result.stdout)}


def test_plugins_json_lists_the_plugins_with_what_they_provide(run_oml):
    report = _report(run_oml("plugins", "--format", "json", env={"OML_LOAD_PLUGINS": None}))
    assert set(report) == set(EXPECTED_PROVIDES)
    for name, provides in EXPECTED_PROVIDES.items():
        assert report[name]["provides"] == provides, name
        assert report[name]["error"] is None
    assert report["oml_losses"]["distribution"] == "oml-losses"
    assert report["oml_losses"]["version"] == "0.1.0"
    assert report["oml_losses"]["hooks"] == [
        "oml_register_config_dirs",
        "oml_register_losses",
        "oml_register_miners",
        "oml_register_pairs_miners",
    ]
    assert report["oml_plugin_example"]["distribution"] == "oml-plugin-example"


def test_plugins_all_includes_the_core_builtins(run_oml):
    report = _report(run_oml("plugins", "--all", "--format", "json", env={"OML_LOAD_PLUGINS": None}))
    assert report["oml_core"]["provides"]["optimizer"] == [
        "adadelta",
        "adagrad",
        "adam",
        "adamax",
        "adamw",
        "asgd",
        "lbfgs",
        "rmsprop",
        "rprop",
        "sgd",
    ]


def test_allow_list_hides_plugins(run_oml):
    assert _report(run_oml("plugins", "--format", "json", env={"OML_LOAD_PLUGINS": ""})) == {}
    only = _report(
        run_oml("plugins", "--format", "json", env={"OML_LOAD_PLUGINS": "oml_losses, oml-samplers"})
    )
    assert set(only) == {"oml_losses", "oml_samplers"}


def _fake_broken_distribution(root: Path) -> Path:
    """A real distribution whose ``oml`` entry point raises on import."""
    source = "raise ImportError('needs the package frobnicate')\n"
    return fake_distribution(root, "broken-oml-plugin", "broken", "broken_oml_plugin", source)


#: A third-party plugin written for the per-kind hooks, with no declared table: it loads beside the table plugins.
HOOKED = """\
from oml_core import hookimpl


@hookimpl
def oml_register_losses(register):
    register("hooked_l1", "torch.nn:L1Loss", description="L1, registered by a hook")
"""


def test_broken_plugin_is_skipped_with_a_warning(run_oml, tmp_path):
    site = fake_distribution(
        _fake_broken_distribution(tmp_path), "hooked-oml-plugin", "hooked", "hooked_plugin", HOOKED
    )
    env = {"PYTHONPATH": str(site), "OML_LOAD_PLUGINS": None}
    result = run_oml("plugins", "--format", "json", env=env)
    report = _report(result)
    assert report["hooked"]["provides"] == {"loss": ["hooked_l1"]}
    assert report["hooked"]["hooks"] == ["oml_register_losses"] and report["hooked"]["error"] is None
    assert (
        "oml plugin broken (broken-oml-plugin 0.3): import failed: ImportError: needs the package frobnicate"
        in (result.stderr)
    )
    assert report["broken"]["error"].endswith("ImportError: needs the package frobnicate")
    assert report["oml_losses"]["error"] is None  # the others still load
    # checked beside one working plugin only: each plugin's check is a process of its own
    checked = run_oml("plugins", "--check", env={**env, "OML_LOAD_PLUGINS": "broken,hooked,oml_samplers"})
    assert checked.returncode == 1
    assert checked.stdout.splitlines()[-1] == "FAILED: 1 problem in 1 plugin (see above)"
    assert (
        "    FAILED: oml plugin broken (broken-oml-plugin 0.3): import failed: ImportError: needs the package "
        "frobnicate\n" in checked.stdout
    )


def test_broken_plugin_raises_when_strict(run_oml, tmp_path):
    env = {
        "PYTHONPATH": str(_fake_broken_distribution(tmp_path)),
        "OML_STRICT_PLUGINS": "1",
        "OML_LOAD_PLUGINS": None,
    }
    result = run_oml("plugins", env=env)
    assert result.returncode == 2
    assert "error: oml plugin broken (broken-oml-plugin 0.3): import failed" in result.stderr
    assert "Traceback" not in result.stderr


def test_registry_command_lists_kinds(run_oml):
    result = run_oml("registry", "loss", env={"OML_LOAD_PLUGINS": None})
    assert result.returncode == 0, result.stderr
    assert "triplet_with_miner" in result.stdout and "contrastive_example" in result.stdout
    rows = json.loads(run_oml("registry", "--format", "json", env={"OML_LOAD_PLUGINS": None}).stdout)
    assert {"kind": "sampler", "name": "balance", "plugin": "oml_samplers"}.items() <= next(
        r for r in rows if r["name"] == "balance"
    ).items()


def test_missing_loss_plugin_names_the_loss_and_its_distribution(run_oml, tmp_path):
    """What `pip uninstall oml-losses` leaves: `oml train` fails with one clear message, no traceback."""
    env = {"OML_LOAD_PLUGINS": "oml_models,oml_samplers,oml_loggers"}
    result = run_oml("train", "max_epochs=1", f"logs_root={tmp_path}", env=env)
    assert result.returncode == 2
    assert "Unknown loss 'triplet_with_miner'" in result.stderr
    assert "provided by the plugin distribution 'oml-losses'" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_loss_plugin_names_the_pair_miner_of_the_postprocessor_training(run_oml, tmp_path):
    """The post-processor training mines pairs with the ``pairs`` miner of oml-losses (the core imports no
    plugin): without it, one line naming the pair miner and its distribution, before any work."""
    env = {"OML_LOAD_PLUGINS": "oml_models,oml_samplers,oml_loggers,oml_postprocessors"}
    result = run_oml("train-postprocessor", "max_epochs=1", f"logs_root={tmp_path}", env=env)
    assert result.returncode == 2
    assert "Unknown pairs_miner 'pairs'" in result.stderr
    assert "provided by the plugin distribution 'oml-losses'" in result.stderr
    assert "Traceback" not in result.stderr
    assert not any(tmp_path.iterdir())
