"""Nothing a config holds is imported or run: a ``"module:attr"`` string given as the ``lambda`` scheduler's
``lr_lambda`` (``os:_exit``, ``os:system``, a C builtin, a module whose import has a side effect) or as any
argument of any component is refused in one line before any work starts, and the module is never imported nor
the function called. Qualified component names (``plugin:name``) still work. A config's hydra search path names
no package to import either."""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import oml_core.configs
from oml_core.cli import main
from oml_core.config.compose import compose_config
from oml_core.registry import ConfigError, Registry
from oml_core.registry.arg_types import check_no_import_paths, is_import_path

#: The known lr functions, as the refusal lists them.
LR_FUNCTIONS = "constant, cosine, linear_warmup, step"
#: A module whose import writes the file ``imported`` and whose ``factor`` writes ``called`` (next to it).
PROBE = "oml_side_effect_probe"
PROBE_SOURCE = """from pathlib import Path

HERE = Path(__file__).parent
(HERE / "imported").write_text("the module was imported")


def factor(epoch):
    (HERE / "called").write_text("the function was called")
    return 1.0
"""


def lr_lambda_override(value: str) -> str:
    return f'scheduling={{scheduler: {{name: lambda, args: {{lr_lambda: "{value}"}}}}}}'


def refusal(value: str) -> str:
    return (
        f"oml train: error: scheduling.scheduler.args.lr_lambda: {value!r} is not a registered lr_function; "
        f"configs name registered components only (oml registry lr_function): {LR_FUNCTIONS}"
    )


@pytest.fixture()
def probe_dir(tmp_path: Path) -> Path:
    """A folder holding the module :data:`PROBE` (not imported by anything yet)."""
    folder = tmp_path / "probe"
    folder.mkdir()
    (folder / f"{PROBE}.py").write_text(PROBE_SOURCE)
    assert PROBE not in sys.modules
    return folder


def assert_probe_untouched(probe_dir: Path) -> None:
    assert not (probe_dir / "imported").exists() and not (probe_dir / "called").exists()


def test_os_exit_ends_oml_train_with_one_line_and_a_failure(run_oml, tmp_path):
    """The fault: ``os:_exit`` ended the run with exit 0 and no word after the image check."""
    done = run_oml("train", f"logs_root={tmp_path / 'logs'}", lr_lambda_override("os:_exit"), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [refusal("os:_exit")]
    assert done.stdout == "" and not (tmp_path / "logs").exists()  # no image check, no run folder


def _called(calls: list[tuple]) -> Callable[..., int]:
    def record(*args):
        calls.append(args)
        return 0

    return record


@pytest.mark.parametrize(
    "module, attr",
    [(os, "system"), (math, "sin"), (os, "_exit")],  # a shell, a C builtin (it used to fail after an epoch)
)
def test_a_module_function_as_lr_lambda_is_refused_and_never_called(
    module, attr, tmp_path, monkeypatch, capsys
):
    calls: list[tuple] = []
    monkeypatch.setattr(module, attr, _called(calls))  # what resolving the path would have found and called
    value = f"{module.__name__}:{attr}"
    assert main(["train", f"logs_root={tmp_path / 'logs'}", lr_lambda_override(value)]) == 2
    assert capsys.readouterr().err.splitlines() == [refusal(value)]
    assert calls == [] and not (tmp_path / "logs").exists()


@pytest.mark.parametrize(
    "override, message",
    [
        (lr_lambda_override(f"{PROBE}:factor"), refusal(f"{PROBE}:factor")),
        (  # the name of a nested spec
            f'scheduling={{scheduler: {{name: lambda, args: {{lr_lambda: {{name: "{PROBE}:factor"}}}}}}}}',
            refusal(f"{PROBE}:factor"),
        ),
        (  # any argument of any component
            f'extractor.args.arch="{PROBE}:factor"',
            f"oml train: error: extractor.args.arch: '{PROBE}:factor' is not a registered component; configs name "
            f"registered components only, and a 'module:attr' string from a config is never imported",
        ),
        (  # a nested component's argument
            f'criterion.args.miner={{name: all_triplets, args: {{device: "{PROBE}:factor"}}}}',
            f"oml train: error: criterion.args.miner.args.device: '{PROBE}:factor' is not a registered component; ",
        ),
        (  # an argument of a spec that a bridge builds itself (oml-pml's distances)
            "criterion={name: pml_triplet_margin, args: {distance: {name: CosineSimilarity, args: "
            f'{{power: "{PROBE}:factor"}}}}}}}}',
            f"oml train: error: criterion.args.distance.args.power: '{PROBE}:factor' is not a registered component; ",
        ),
        (
            f'+logger.args.name="{PROBE}:factor"',
            f"oml train: error: logger.args.name: '{PROBE}:factor' is not a registered component; configs name "
            f"registered components only, and a 'module:attr' string from a config is never imported",
        ),
        (
            f'criterion={{name: "{PROBE}:factor"}}',
            f"oml train: error: criterion: '{PROBE}:factor' is not a registered loss; configs name registered "
            f"components only (oml registry loss): ",
        ),
    ],
    ids=[
        "lr_lambda",
        "lr_lambda-spec",
        "extractor-arg",
        "miner-arg",
        "pml-distance-arg",
        "logger-arg",
        "name",
    ],
)
def test_a_module_with_an_import_side_effect_is_never_imported_from_any_key(
    override, message, tmp_path, probe_dir, monkeypatch, capsys
):
    monkeypatch.syspath_prepend(str(probe_dir))
    assert main(["train", f"logs_root={tmp_path / 'logs'}", override]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(message)
    assert PROBE not in sys.modules
    assert_probe_untouched(probe_dir)
    assert not (tmp_path / "logs").exists()


def test_library_builds_refuse_an_import_path_too():
    registry = Registry(load_entrypoints=False)
    with pytest.raises(
        ConfigError, match="^scheduler 'lambda': argument last_epoch: expected int, got 'os:system'$"
    ):
        registry.build(
            "scheduler", {"name": "lambda", "args": {"lr_lambda": "constant", "last_epoch": "os:system"}}
        )
    with pytest.raises(ConfigError) as error:
        registry.build("knn_backend", {"name": "exact", "args": {"distance": "os:system"}})
    assert str(error.value) == (
        "knn_backend 'exact': argument distance: 'os:system' is not a registered component; configs name "
        "registered components only, and a 'module:attr' string from a config is never imported"
    )


@pytest.mark.parametrize(
    "value, is_path",
    [
        ("os:_exit", True),
        ("os.path:join", True),
        ("pkg.mod:Class.method", True),
        ("oml_core:cosine", False),  # a qualified name of a loaded plugin's component
        ("oml_models:vits16_dino", False),  # a qualified zoo key
        ("cosine", False),
        ("cuda:0", False),
        ("https://example.com/a.pt", False),
        ("C:\\data\\x.ckpt", False),
        ("hf-hub:timm/vit", False),
        (3, False),
    ],
)
def test_what_an_import_path_is(value, is_path):
    assert is_import_path(value, {"oml_core", "oml_models"}) is is_path


def test_strings_are_looked_at_at_any_depth_but_component_names_are_not():
    def factory(weights: str, layers: list, options: dict, miner: dict) -> None: ...

    plugins = {"oml_models"}
    fine = {
        "weights": "oml_models:vits16_dino",
        "layers": ["a", 1],
        "options": {"k": "v"},
        "miner": {"name": "x"},
    }
    check_no_import_paths(factory, fine, "extractor.args.", plugins)
    for args, place in [
        ({"layers": ["a", "os:system"]}, "extractor.args.layers[1]"),
        ({"options": {"deep": {"deeper": "os:system"}}}, "extractor.args.options.deep.deeper"),
        ({"miner": {"name": "m", "args": {"fn": "os:system"}}}, "extractor.args.miner.args.fn"),
    ]:
        with pytest.raises(
            ConfigError, match=f"^{re.escape(place)}: 'os:system' is not a registered component"
        ):
            check_no_import_paths(factory, args, "extractor.args.", plugins)


@pytest.fixture()
def probe_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A package ``oml_probe_package`` on ``sys.path`` whose import writes the file ``imported`` next to it."""
    package = tmp_path / "packages" / "oml_probe_package"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        'from pathlib import Path\n\n(Path(__file__).parent / "imported").write_text("imported")\n'
    )
    monkeypatch.syspath_prepend(str(package.parent))
    return package


def test_a_config_search_path_never_imports_a_package(probe_package, tmp_path):
    """hydra imports a ``pkg://`` search-path entry's package to read it: only the plugins' own are taken."""
    config_dir = tmp_path / "configs"
    config_dir.mkdir()
    default = (Path(oml_core.configs.__file__).parent / "extractor_training_pipeline.yaml").read_text()
    (config_dir / "train.yaml").write_text(default + "hydra:\n  searchpath:\n    - pkg://oml_probe_package\n")
    with pytest.raises(ConfigError) as error:
        compose_config("train", [], str(config_dir))
    assert str(error.value) == (
        f"{config_dir / 'train.yaml'}: hydra.searchpath: 'pkg://oml_probe_package' is no loaded plugin's config "
        f"dir; a config adds folders (file://...) and the plugins' pkg:// dirs only, never a package to import"
    )
    with pytest.raises(
        ConfigError, match=r"^hydra.searchpath=\[pkg://oml_probe_package\]: the config search path is"
    ):
        compose_config("extractor_training_pipeline", ["hydra.searchpath=[pkg://oml_probe_package]"])
    assert "oml_probe_package" not in sys.modules and not (probe_package / "imported").exists()
    # OML's own entry is the core's config dir, a plugin's
    (config_dir / "oml.yaml").write_text(default + "hydra:\n  searchpath:\n    - pkg://oml.configs\n")
    assert compose_config("oml", ["max_epochs=1"], str(config_dir)).max_epochs == 1
