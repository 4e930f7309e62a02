"""The oml_samplers plugin through the registry."""

from __future__ import annotations

import subprocess
import sys

from oml_samplers import BalanceSampler

from oml_core.registry import Registry


def test_build_balance_with_runtime_labels() -> None:
    registry = Registry(allow=["oml_samplers"], strict=True)
    assert "balance" in registry.names("sampler")
    info = registry.describe("sampler", "balance")
    assert info["distribution"] == "oml-samplers" and info["factory"] == "oml_samplers.balance:BalanceSampler"
    labels = [0, 0, 1, 1, 2, 2, 3, 3]
    sampler = registry.build(
        "sampler", {"name": "balance", "args": {"n_labels": 2, "n_instances": 2}}, labels=labels
    )
    assert isinstance(sampler, BalanceSampler)
    assert len(sampler) == 2 and [len(b) for b in sampler] == [4, 4]


def test_plugin_module_imports_no_sampler_module() -> None:
    code = (
        "import sys, oml_samplers.plugin; "
        "print(sorted(m for m in sys.modules "
        "if m.startswith('oml_samplers.') and m != 'oml_samplers.plugin'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
