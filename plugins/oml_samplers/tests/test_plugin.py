"""The oml_samplers plugin through the registry: registered names, default configs, lazy loading."""

from __future__ import annotations

import inspect
import subprocess
import sys
from typing import Any

import pytest
from oml_samplers import BalanceSampler, CategoryBalanceSampler, DistinctCategoryBalanceSampler

from oml_core.registry import Registry

CLASSES = {
    "balance": BalanceSampler,
    "category_balance": CategoryBalanceSampler,
    "distinct_category_balance": DistinctCategoryBalanceSampler,
}
RUNTIME_ARGS = {"labels", "label2category", "generator", "seed"}

# 16 labels of 8 items each, in 6 categories of 2 or 3 labels: the shape of the mock dataset's train split
LABELS = [label for label in range(16) for _ in range(8)]
LABEL2CATEGORY = {label: f"shape{label % 6}" for label in range(16)}


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry(allow=["oml_samplers"], strict=True)


def test_registered_names(registry: Registry) -> None:
    assert registry.provided_by("oml_samplers") == {"sampler": sorted(CLASSES)}
    assert "pkg://oml_samplers.configs" in registry.config_dirs()
    for name, cls in CLASSES.items():
        info = registry.describe("sampler", name)
        assert info["distribution"] == "oml-samplers"
        assert info["factory"] == f"oml_samplers.{name}:{cls.__name__}"


def test_build_balance_with_runtime_labels(registry: Registry) -> None:
    labels = [0, 0, 1, 1, 2, 2, 3, 3]
    sampler = registry.build(
        "sampler", {"name": "balance", "args": {"n_labels": 2, "n_instances": 2}}, labels=labels
    )
    assert isinstance(sampler, BalanceSampler)
    assert len(sampler) == 2 and [len(b) for b in sampler] == [4, 4]


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_default_config_builds_and_iterates(registry: Registry, name: str) -> None:
    cfg = registry.default_config("sampler", name)
    assert cfg is not None and cfg["name"] == name
    expected_args = set(inspect.signature(CLASSES[name]).parameters) - RUNTIME_ARGS
    assert set(cfg["args"]) == expected_args  # every non-runtime argument, no runtime one
    runtime: dict[str, Any] = {"labels": LABELS}
    if "label2category" in inspect.signature(CLASSES[name]).parameters:
        runtime["label2category"] = LABEL2CATEGORY
    sampler = registry.build("sampler", cfg, **runtime)
    assert isinstance(sampler, CLASSES[name])
    epoch = list(sampler)
    assert len(epoch) == len(sampler) > 0
    assert all(len(batch) == sampler.batch_size for batch in epoch)
    assert all(0 <= i < len(LABELS) for batch in epoch for i in batch)


def test_default_configs_hold_the_documented_defaults(registry: Registry) -> None:
    assert registry.default_config("sampler", "balance")["args"] == {"n_labels": 4, "n_instances": 4}
    assert registry.default_config("sampler", "category_balance")["args"] == {
        "n_categories": 2,
        "n_labels": 2,
        "n_instances": 4,
        "resample_labels": False,
        "weight_categories": True,
    }
    assert registry.default_config("sampler", "distinct_category_balance")["args"] == {
        "n_categories": 2,
        "n_labels": 2,
        "n_instances": 4,
        "epoch_size": 8,
    }


def test_category_sampler_without_label2category_names_it(registry: Registry) -> None:
    cfg = registry.default_config("sampler", "category_balance")
    with pytest.raises(ValueError, match="label2category is None"):
        registry.build("sampler", cfg, labels=LABELS, label2category=None)


def test_plugin_module_imports_no_sampler_module() -> None:
    code = (
        "import sys, oml_samplers.plugin; "
        "print(sorted(m for m in sys.modules "
        "if m.startswith('oml_samplers.') and m != 'oml_samplers.plugin'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
