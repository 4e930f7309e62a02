"""Tests of the plugin: registered names, lazy imports, default configs, and the errors for a missing client
library, missing credentials and unknown arguments."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from oml_loggers import (
    ClearMLPipelineLogger,
    MissingCredentialsError,
    MLFlowPipelineLogger,
    NeptunePipelineLogger,
    WandBPipelineLogger,
    end_open_runs,
)
from oml_loggers import plugin as loggers_plugin

from oml_core.interfaces.loggers import IPipelineLogger
from oml_core.registry import Registry

CLASSES = {
    "tensorboard": "oml_loggers.tensorboard:TensorBoardPipelineLogger",
    "mlflow": "oml_loggers.mlflow:MLFlowPipelineLogger",
    "wandb": "oml_loggers.wandb:WandBPipelineLogger",
    "neptune": "oml_loggers.neptune:NeptunePipelineLogger",
    "clearml": "oml_loggers.clearml:ClearMLPipelineLogger",
}
CLIENT_LIBRARIES = ("mlflow", "wandb", "neptune", "clearml")


@pytest.fixture()
def registry() -> Registry:
    return Registry(plugins=[("oml_loggers", loggers_plugin)], load_entrypoints=False)


def test_registered_names_and_factories(registry: Registry) -> None:
    assert {name: registry.describe("logger", name)["factory"] for name in CLASSES} == CLASSES
    assert set(CLASSES) <= set(registry.names("logger"))


def test_installed_entry_point_provides_every_logger() -> None:
    registry = Registry()
    assert {registry.get("logger", name).plugin.distribution for name in CLASSES} == {"oml-loggers"}


def test_loading_the_plugin_imports_no_client_library() -> None:
    code = (
        "import sys, json, oml_loggers, oml_loggers.plugin\n"
        "from oml_core.registry import Registry\n"
        "r = Registry()\n"
        "names = r.names('logger')\n"
        "configs = [r.default_config('logger', n) for n in ('mlflow', 'wandb', 'neptune', 'clearml')]\n"
        f"print(json.dumps([m for m in {CLIENT_LIBRARIES!r} if m in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out.strip().splitlines()[-1]) == []


#: A file or folder each default config's logger writes (relative to the working folder or the clients' one).
DEFAULT_CONFIG_OUTPUT = {
    "tensorboard": ("work", "version_0/events.out.tfevents.*"),
    "mlflow": ("work", "mlruns/mlflow.db"),
    "wandb": ("work", "wandb/offline-run-*/run-*.wandb"),
    "neptune": ("work", ".neptune/offline/run__*/data-1.log"),
    "clearml": ("clients", "clearml_cache/offline/offline-*.zip"),
}


@pytest.mark.usefixtures("clearml_offline_state")
@pytest.mark.parametrize("name", sorted(CLASSES))
def test_default_config_builds_an_offline_logger(
    name: str, registry: Registry, tmp_path: Path, isolated_clients: Path
) -> None:
    spec = registry.default_config("logger", name)
    assert spec is not None and spec["name"] == name
    logger = registry.build("logger", spec)  # no credentials in the environment: an offline one
    assert isinstance(logger, IPipelineLogger)
    logger.log_metrics({"loss": 0.5}, step=1)
    logger.finalize("success")
    end_open_runs()  # what the next pipeline's logger, or the end of the process, does
    base, pattern = DEFAULT_CONFIG_OUTPUT[name]
    assert len(list((tmp_path / base).glob(pattern))) == 1


@pytest.mark.parametrize(
    ("cls", "module", "extra"),
    [
        (MLFlowPipelineLogger, "mlflow", "mlflow"),
        (WandBPipelineLogger, "wandb", "wandb"),
        (NeptunePipelineLogger, "neptune", "neptune"),
        (ClearMLPipelineLogger, "clearml", "clearml"),
    ],
)
def test_missing_client_library_names_the_extra(
    cls: type, module: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # `import module` raises ImportError
    with pytest.raises(ImportError, match=rf"pip install 'oml-loggers\[{extra}\]'") as error:
        cls()
    assert cls.__name__ in str(error.value) and repr(module) in str(error.value)


@pytest.mark.parametrize(
    ("cls", "kwargs", "missing", "hint"),
    [
        (WandBPipelineLogger, {"project": "p"}, ["WANDB_API_KEY"], "offline: true"),
        (NeptunePipelineLogger, {"project": "ws/p"}, ["NEPTUNE_API_TOKEN"], "mode: offline"),
        (NeptunePipelineLogger, {"api_key": "k"}, ["NEPTUNE_PROJECT"], "mode: offline"),
        (NeptunePipelineLogger, {}, ["NEPTUNE_API_TOKEN", "NEPTUNE_PROJECT"], "mode: offline"),
        (
            ClearMLPipelineLogger,
            {"offline_mode": False},
            ["CLEARML_API_ACCESS_KEY", "CLEARML_API_SECRET_KEY"],
            "offline_mode: true",
        ),
    ],
)
def test_online_mode_without_credentials_is_refused_before_connecting(
    cls: type,
    kwargs: dict[str, Any],
    missing: list[str],
    hint: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("CLEARML_CONFIG_FILE", str(tmp_path / "no_such_clearml.conf"))
    with pytest.raises(MissingCredentialsError) as error:
        cls(**kwargs)
    message = str(error.value)
    assert message.startswith(f"{cls.__name__}: logging online")
    assert f"environment variable(s) {', '.join(missing)}," in message and hint in message


@pytest.mark.parametrize(
    ("cls", "env", "kwargs"),
    [
        (WandBPipelineLogger, {"WANDB_API_KEY": "k"}, {"project": "p"}),
        (NeptunePipelineLogger, {"NEPTUNE_API_TOKEN": "t", "NEPTUNE_PROJECT": "ws/p"}, {}),
        (
            ClearMLPipelineLogger,
            {"CLEARML_API_ACCESS_KEY": "a", "CLEARML_API_SECRET_KEY": "s"},
            {"offline_mode": False},
        ),
    ],
)
def test_online_mode_with_credentials_connects_only_when_used(
    cls: type, env: dict[str, str], kwargs: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CLEARML_CONFIG_FILE", str(tmp_path / "no_such_clearml.conf"))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    logger = cls(**kwargs)  # the no_network fixture fails the test on any connection attempt
    assert isinstance(logger, IPipelineLogger)


def test_clearml_conf_counts_as_credentials(isolated_clients: Path) -> None:
    assert (isolated_clients / "clearml.conf").is_file()  # CLEARML_CONFIG_FILE, set by isolated_clients
    assert isinstance(ClearMLPipelineLogger(offline_mode=False), IPipelineLogger)


@pytest.mark.parametrize(
    ("cls", "kwargs", "client"),
    [
        (WandBPipelineLogger, {"offline": True, "colour": "red"}, "wandb.sdk.wandb_init.init"),
        (NeptunePipelineLogger, {"mode": "offline", "colour": "red"}, "neptune.metadata_containers.run"),
        (ClearMLPipelineLogger, {"colour": "red"}, "clearml.task.Task.init"),
    ],
)
def test_unknown_client_argument_is_refused_at_once(cls: type, kwargs: dict[str, Any], client: str) -> None:
    with pytest.raises(
        TypeError, match=rf"{cls.__name__} got unexpected argument\(s\) \['colour'\]"
    ) as error:
        cls(**kwargs)
    assert client in str(error.value)
