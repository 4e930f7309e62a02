"""Every command's answer as data (:mod:`oml_core.reports`), built without the command line: the search answer of a
tiny index, the plugins table and verdict of a known plugin, the registry's listing and one component, the index's
changes, the version, a dataframe's check, an export, a written plugin. Each answer's JSON is its data, and its text
is what the command prints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

import oml_core
from oml_core import hookimpl
from oml_core.index import GalleryIndex
from oml_core.index.build import IndexBuildResult
from oml_core.index.gallery import SearchHit
from oml_core.registry import Registry
from oml_core.registry.plugin_rows import plugins_report
from oml_core.reports.datasets import DataFrameCheck, MockDatasetWritten, check_dataframe
from oml_core.reports.export import Exported, ExportInput
from oml_core.reports.index import IndexBuilt, ItemsAdded, ItemsRemoved, Recalibrated, index_built
from oml_core.reports.plugins import NO_PLUGINS, PluginsAnswer, plugin_written
from oml_core.reports.registry import component_view, registry_listing
from oml_core.reports.search import search_answer
from oml_core.reports.version import Distribution, Versions, versions


def tiny_index() -> GalleryIndex:
    """Three items in the plane, without an extractor: ids 10, 11, 12 at (0, 0), (3, 0), (0, 4)."""
    index = GalleryIndex(registry=Registry(load_entrypoints=False))
    points = torch.tensor([[0.0, 0.0], [3.0, 0.0], [0.0, 4.0]])
    index.add(points, labels=[0, 1, None], ids=[10, 11, 12], paths=["a.png", "b.png", None])
    return index


# ----------------------------------------------------------------------------------------------------- search
def test_the_search_answer_of_a_tiny_index_is_its_hits_nearest_first():
    hits = tiny_index().search(torch.tensor([[0.0, 0.0], [0.0, 3.0]]), top_k=2)
    answer = search_answer(Path("idx"), None, ["origin", "up"], hits, calibration_stale=False)
    assert answer.as_data() == {
        "index": "idx",
        "threshold": None,
        "calibration_stale": False,
        "queries": [
            {
                "query": "origin",
                "match": None,
                "results": [
                    {"rank": 1, "id": 10, "path": "a.png", "label": 0, "distance": 0.0, "match": None},
                    {"rank": 2, "id": 11, "path": "b.png", "label": 1, "distance": 3.0, "match": None},
                ],
            },
            {
                "query": "up",
                "match": None,
                "results": [
                    {"rank": 1, "id": 12, "path": None, "label": None, "distance": 1.0, "match": None},
                    {"rank": 2, "id": 10, "path": "a.png", "label": 0, "distance": 3.0, "match": None},
                ],
            },
        ],
    }
    assert json.loads(answer.as_json()) == answer.as_data()
    assert answer.as_text().splitlines() == [
        "origin: (the index is not calibrated: distances only)",
        "  rank  distance  label  id  path",
        "  1     0.000000  0      10  a.png",
        "  2     3.000000  1      11  b.png",
        "up: (the index is not calibrated: distances only)",
        "  rank  distance  label  id  path",
        "  1     1.000000  -      12  -",
        "  2     3.000000  0      10  a.png",
    ]


def test_a_calibrated_answer_says_match_per_query_and_hit_and_a_stale_threshold():
    hits = [
        [SearchHit(1, 7, "/g/cat.png", 3, 0.25, True), SearchHit(2, 8, "/g/dog.png", 4, 0.75, False)],
        [SearchHit(1, 8, "/g/dog.png", 4, 0.6, False)],
        [],
    ]
    answer = search_answer("my index", 0.5, ["cat.png", "car.png", "none.png"], hits, calibration_stale=True)
    assert [query.match for query in answer.queries] == [True, False, False]  # nothing found: no match
    stale = " (calibration stale: oml index calibrate my index)"
    assert answer.as_text().splitlines() == [
        f"cat.png: match (threshold 0.5){stale}",
        "  rank  distance  match     label  id  path",
        "  1     0.250000  match     3      7   /g/cat.png",
        "  2     0.750000  no match  4      8   /g/dog.png",
        f"car.png: no match (threshold 0.5){stale}",
        "  rank  distance  match     label  id  path",
        "  1     0.600000  no match  4      8   /g/dog.png",
        f"none.png: no match (threshold 0.5){stale}",
        "  rank  distance  match  label  id  path",
    ]


def test_the_names_and_hits_of_a_search_answer_must_pair():
    with pytest.raises(ValueError):
        search_answer("idx", None, ["a", "b"], [[]], calibration_stale=False)


# ---------------------------------------------------------------------------------------------------- plugins
class ScaledLoss(nn.Module):
    """A loss of the test plugin."""

    def __init__(self, margin: float = 0.5, *, scale: int, tag: object = print) -> None:
        super().__init__()
        self.margin, self.scale = margin, scale


class AcmePlugin:
    """A plugin given in code: a loss and a callback added to every run."""

    @hookimpl
    def oml_register_losses(self, register):
        register("scaled", ScaledLoss, description="a margin, scaled")

    @hookimpl
    def oml_register_callbacks(self, register):
        register("beeper", "acme_missing_module:Beeper", description="beeps", every_run=True)


def acme_registry() -> Registry:
    registry = Registry(load_entrypoints=False, builtins=False)
    registry.add_plugin(AcmePlugin(), name="acme", distribution="oml-acme", version="1.2")
    return registry


def test_the_plugins_table_of_a_known_plugin_and_its_verdicts():
    rows = plugins_report(acme_registry(), check=True)
    answer = PluginsAnswer(rows, checked=True)
    lines = answer.as_text().splitlines()
    assert lines[:3] == [
        "acme  [oml-acme 1.2]",
        "    loss             scaled",
        "    callback         beeper (every run)",
    ]
    assert len(lines) == 4 and lines[3].startswith("    BROKEN: ") and "acme_missing_module" in lines[3]
    assert answer.verdict() == (False, "FAILED: 1 problem in 1 plugin (see above)")
    assert answer.as_data() == rows and json.loads(answer.as_json()) == rows

    unchecked = PluginsAnswer(plugins_report(acme_registry()))
    assert "BROKEN" not in unchecked.as_text()
    assert unchecked.verdict() == (True, "OK: 1 plugin, 2 components load")
    failed = {
        "name": "ghost",
        "distribution": None,
        "version": None,
        "provides": {},
        "every_run": [],
        "error": "boom",
    }
    assert PluginsAnswer([failed]).as_text() == "ghost  [in code]\n    FAILED: boom"
    assert PluginsAnswer([failed, failed]).verdict() == (False, "FAILED: 2 problems in 2 plugins (see above)")
    assert PluginsAnswer([]).as_text() == NO_PLUGINS


def test_a_written_plugin_lists_its_files_and_what_to_do_next(tmp_path):
    folder = tmp_path / "oml acme"
    (folder / "oml_acme").mkdir(parents=True)
    (folder / "pyproject.toml").write_text("")
    (folder / "oml_acme" / "plugin.py").write_text("")
    answer = plugin_written("oml-acme", folder)
    assert answer.files == ["oml_acme/plugin.py", "pyproject.toml"]
    assert answer.as_text().splitlines() == [
        f"Plugin 'oml-acme' written to {folder}:",
        "  oml_acme/plugin.py",
        "  pyproject.toml",
        f"Next: pip install -e '{folder}[test]'; pytest '{folder}'; oml plugins",
    ]


# --------------------------------------------------------------------------------------------------- registry
def test_the_registry_listing_of_one_kind_shows_descriptions_and_its_json_is_its_rows():
    listing = registry_listing(acme_registry(), ["loss", "callback"])
    assert listing.as_data() == [
        {
            "kind": "loss",
            "name": "scaled",
            "plugin": "acme",
            "aliases": [],
            "description": "a margin, scaled",
            "every_run": False,
        },
        {
            "kind": "callback",
            "name": "beeper",
            "plugin": "acme",
            "aliases": [],
            "description": "beeps",
            "every_run": True,
        },
    ]
    lines = listing.as_text().splitlines()
    assert lines[1] == f"    {'scaled':<32} acme - a margin, scaled"
    assert lines[3] == f"    {'beeper':<32} acme (every run) - beeps"
    assert lines[0].startswith("loss (") and lines[2].startswith("callback (")
    every_kind = registry_listing(acme_registry())
    assert not every_kind.detailed and f"    {'scaled':<32} acme" in every_kind.as_text().splitlines()
    assert "    (none)" in every_kind.as_text().splitlines()  # the kinds the plugin does not provide


def test_one_component_shows_its_arguments_and_its_json_writes_defaults_as_json_or_repr():
    view = component_view(acme_registry(), "loss", "scaled")
    data = view.as_data()
    assert (data["kind"], data["name"], data["provider"], data["default_config"]) == (
        "loss",
        "scaled",
        view.report["provider"],
        None,
    )
    assert data["arguments"] == [
        {
            "name": "margin",
            "kind": "positional_or_keyword",
            "annotation": "float",
            "required": False,
            "default": 0.5,
        },
        {"name": "scale", "kind": "keyword_only", "annotation": "int", "required": True},
        {
            "name": "tag",
            "kind": "keyword_only",
            "annotation": "object",
            "required": False,
            "default": repr(print),
        },
    ]
    assert json.loads(view.as_json()) == data
    lines = view.as_text().splitlines()
    assert lines[0] == "kind:        loss"
    assert "name:        scaled (qualified: acme:scaled)" in lines
    assert "provider:    plugin acme, distribution oml-acme 1.2" in lines
    assert lines[-5:] == [
        "arguments:",
        "    margin: float = 0.5",
        "    scale: int  (required)",
        f"    tag: object = {print!r}",
        "default config: (no default config)",
    ]


# ------------------------------------------------------------------------------------------------------ index
def test_the_changes_of_an_index_are_one_line_each():
    assert ItemsAdded(added=2, updated=1, generation=7).as_text() == "added 2, updated 1, generation 7"
    assert ItemsAdded(2, 1, 7).as_data() == {"added": 2, "updated": 1, "generation": 7}
    assert ItemsRemoved(removed=3, generation=8).as_text() == "removed 3, generation 8"
    recalibrated = Recalibrated(calibration="threshold 0.5 (max F1): ...", generation=9)
    assert recalibrated.as_text() == "calibrated: threshold 0.5 (max F1): ...; generation 9"


def test_the_summary_of_a_built_index():
    result = IndexBuildResult(
        index=tiny_index(),
        index_dir=Path("/indexes/my index"),
        source=Path("/data/df.csv"),
        not_calibrated="no validation rows",
    )
    answer = index_built(result)
    assert answer == IndexBuilt(
        items=3,
        source="/data/df.csv",
        backend="exact",
        distance="l2",
        calibration=None,
        not_calibrated="no validation rows",
        index_dir="/indexes/my index",
        embeddings_out=None,
    )
    assert answer.as_text().splitlines() == [
        "Gallery index:    3 items of /data/df.csv (knn backend 'exact', l2)",
        "Calibration:      none (no validation rows): oml search answers with distances only",
        "Index folder:     /indexes/my index",
        "Search it:        oml search '/indexes/my index' QUERY...",
    ]


# --------------------------------------------------------------------------------------- version, data, export
def test_the_versions_name_oml_core_and_each_plugin_distribution():
    answer = Versions("1.2", [Distribution("oml-acme", "0.3"), Distribution("oml-bare", None)])
    assert answer.as_text() == "oml-core 1.2\noml-acme 0.3\noml-bare ?"
    assert answer.as_data() == {
        "oml_core": "1.2",
        "plugins": [
            {"distribution": "oml-acme", "version": "0.3"},
            {"distribution": "oml-bare", "version": None},
        ],
    }
    assert versions(allow=["no-such-plugin"]) == Versions(oml_core.__version__, [])


def test_a_dataframe_check_says_its_error_or_its_warnings(tmp_path):
    missing = check_dataframe(tmp_path / "none.csv", None, ",", "utf-8")
    assert (
        not missing.ok
        and missing.messages() == [f"error: {missing.error}"]
        and "none.csv" in missing.as_text()
    )
    warned = DataFrameCheck(csv="df.csv", warnings=["no train rows", "no validation rows"])
    assert warned.ok and warned.as_text() == "warning: no train rows\nwarning: no validation rows"
    assert DataFrameCheck(csv="df.csv").as_text() == ""
    assert MockDatasetWritten("/data/mock").as_text() == "Mock dataset written to /data/mock"


def test_an_export_says_what_it_wrote_and_how_to_run_it():
    answer = Exported(
        extractor="resnet",
        source_kind="checkpoint",
        source_name="best.ckpt",
        model="/out/model.onnx",
        inputs=[ExportInput("input", "float32", ["batch", 3, 224, 224])],
        opset=18,
        max_relative_l2=2.5e-7,
        probes=3,
        tolerance=1e-4,
        manifest="/out/export.json",
        validate_overrides=["extractor@extractor=onnx", "extractor.args.path=/out"],
    )
    assert answer.as_text().splitlines() == [
        "Exported:         resnet of the checkpoint best.ckpt",
        "ONNX model:       /out/model.onnx (inputs: input float32 [batch, 3, 224, 224]; opset 18)",
        "Parity:           relative L2 2.5e-07 to PyTorch on 3 probes (tolerance 0.0001)",
        "Manifest:         /out/export.json",
        "Run it:           oml validate extractor@extractor=onnx extractor.args.path=/out",
    ]
    assert answer.as_data()["inputs"] == [
        {"name": "input", "dtype": "float32", "shape": ["batch", 3, 224, 224]}
    ]
