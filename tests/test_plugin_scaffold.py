"""``oml plugin new``: the names and checks of :mod:`oml_core.scaffold`, and a scaffolded plugin installed into a
throwaway environment, where its own tests pass and ``oml train`` runs a step with its components."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import torch

from oml_core.cli import main
from oml_core.scaffold import (
    PluginScaffoldError,
    ScaffoldNames,
    core_version_bounds,
    new_plugin,
)

ACME_FILES = {
    "README.md",
    "pyproject.toml",
    "oml_acme/__init__.py",
    "oml_acme/plugin.py",
    "oml_acme/py.typed",
    "oml_acme/extractor.py",
    "oml_acme/loss.py",
    "oml_acme/metric.py",
    "oml_acme/dataset.py",
    "oml_acme/configs/__init__.py",
    "oml_acme/configs/extractor/acme_net.yaml",
    "oml_acme/configs/loss/acme_center.yaml",
    "oml_acme/configs/dataset/acme_features.yaml",
    "tests/test_oml_acme.py",
}


def _files(folder: Path) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file()}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("oml-acme", ScaffoldNames("oml-acme", "oml_acme", "acme", "Acme")),
        ("Acme_Tools", ScaffoldNames("acme_tools", "acme_tools", "acme_tools", "AcmeTools")),
        ("oml-face-v2", ScaffoldNames("oml-face-v2", "oml_face_v2", "face_v2", "FaceV2")),
    ],
)
def test_the_names_of_a_plugin(name: str, expected: ScaffoldNames) -> None:
    assert ScaffoldNames.of(name) == expected


@pytest.mark.parametrize("name", ["9lives", "acme plugin", "acme--x", "-acme", "acme-", "class", "acmé"])
def test_a_bad_name_is_refused(name: str) -> None:
    with pytest.raises(PluginScaffoldError, match=re.escape(repr(name))):
        ScaffoldNames.of(name)


def test_the_core_requirement_is_the_minor_series() -> None:
    assert core_version_bounds("0.1.0") == ">=0.1,<0.2"
    assert core_version_bounds("0.1.7") == ">=0.1,<0.2"
    assert core_version_bounds("1.12.3") == ">=1.12,<1.13"


def test_every_kind_by_default_and_the_files_of_some(tmp_path: Path) -> None:
    assert _files(new_plugin("oml-acme", tmp_path / "all")) == ACME_FILES
    folder = new_plugin("oml-acme", tmp_path / "metric", kinds=["retrieval_metric"])
    assert _files(folder) == {
        "README.md",
        "pyproject.toml",
        "oml_acme/__init__.py",
        "oml_acme/plugin.py",
        "oml_acme/py.typed",
        "oml_acme/metric.py",
        "tests/test_oml_acme.py",
    }
    plugin = (folder / "oml_acme" / "plugin.py").read_text()
    assert "OML_COMPONENTS = COMPONENTS" in plugin and "def oml_register_" not in plugin
    assert "OML_CONFIG_DIRS" not in plugin
    assert 'dependencies = ["oml-core>=0.1,<0.2", "torch>=2.1"]' in (folder / "pyproject.toml").read_text()
    assert 'test = ["pytest>=7.4"]' in (folder / "pyproject.toml").read_text()

    folder = new_plugin("oml-acme", tmp_path / "dataset", kinds=["dataset"])
    assert _files(folder) == {
        "README.md",
        "pyproject.toml",
        "oml_acme/__init__.py",
        "oml_acme/plugin.py",
        "oml_acme/py.typed",
        "oml_acme/dataset.py",
        "oml_acme/configs/__init__.py",
        "oml_acme/configs/dataset/acme_features.yaml",
        "tests/test_oml_acme.py",
    }
    plugin = (folder / "oml_acme" / "plugin.py").read_text()
    assert (
        "OML_COMPONENTS = COMPONENTS" in plugin and 'OML_CONFIG_DIRS = ("pkg://oml_acme.configs",)' in plugin
    )
    # its tests run oml's validation pipeline, whose default logger is oml-loggers'
    assert 'test = ["pytest>=7.4", "oml-loggers>=0.1,<0.2"]' in (folder / "pyproject.toml").read_text()
    assert "oml train dataset.name=acme_features dataset_root=" in (folder / "README.md").read_text()


def test_an_empty_folder_is_used_and_a_folder_with_files_is_left_as_it_is(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert _files(new_plugin("oml-acme", tmp_path / "empty")) == ACME_FILES
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(PluginScaffoldError, match="busy exists and is not empty"):
        new_plugin("oml-acme", busy)
    assert _files(busy) == {"notes.txt"} and (busy / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["busy", "empty"]  # no staging folder left


def test_unknown_or_no_kinds_are_refused(tmp_path: Path) -> None:
    with pytest.raises(PluginScaffoldError, match=r"unknown kind\(s\) \['sampler'\]; .*extractor, loss"):
        new_plugin("oml-acme", tmp_path / "x", kinds=["loss", "sampler"])
    with pytest.raises(PluginScaffoldError, match="no kind given"):
        new_plugin("oml-acme", tmp_path / "x", kinds=[])
    assert not (tmp_path / "x").exists()


def test_the_cli_writes_the_plugin_and_names_a_user_error_in_one_line(tmp_path: Path, capsys) -> None:
    assert main(["plugin", "new", "oml-acme", str(tmp_path / "p"), "--kinds", "extractor, loss"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Plugin 'oml-acme' written to {tmp_path / 'p'}:\n")
    assert "  oml_acme/configs/loss/acme_center.yaml\n" in out and "metric.py" not in out
    assert main(["plugin", "new", "oml-acme", str(tmp_path / "p")]) == 2
    assert (
        capsys.readouterr().err
        == f"oml plugin new: error: {tmp_path / 'p'} exists and is not empty: give a new folder\n"
    )


def _throwaway_env(folder: Path) -> Path:
    """A new virtual environment that sees this environment's packages (torch, oml-core and its plugins, pip)
    through a ``.pth`` file, so that nothing is downloaded; returns its python."""
    # without pip: this environment's pip and setuptools (a recent one, with bdist_wheel) install into it
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(folder)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    python = folder / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    (Path(purelib) / "oml_parent_env.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    return python


@pytest.mark.slow
def test_a_scaffolded_plugin_installs_passes_its_tests_and_trains(
    tmp_path: Path, oml_cache_dir: Path
) -> None:
    source = new_plugin("oml-acme", tmp_path / "oml-acme")
    python = _throwaway_env(tmp_path / "env")
    env = {**os.environ, "OML_CACHE_DIR": str(oml_cache_dir), "OMP_NUM_THREADS": "1"}

    def run(*args: str, cwd: Path = tmp_path) -> str:
        done = subprocess.run(
            [str(python), *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=600, check=False
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done.stdout

    # a real (non-editable) install: the wheel must carry the plugin module, its configs and the entry point
    run("-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "-q", str(source))
    installed = Path(run("-c", "import oml_acme; print(oml_acme.__file__)").strip())
    assert installed.parent.parent == Path(
        run("-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()
    )
    assert (installed.parent / "configs" / "extractor" / "acme_net.yaml").is_file()

    tests = run("-m", "pytest", "-q", "-p", "no:cacheprovider", str(source / "tests"), cwd=source)
    # 7 of the extractor, the loss and the metric; 8 of the dataset, one of them oml's validation pipeline on it
    assert re.search(r"^15 passed", tests, re.MULTILINE), tests

    plugins = run("-m", "oml_core.cli", "plugins", "--format", "json")
    assert '"oml_acme"' in plugins and '"acme_net"' in plugins

    logs = tmp_path / "logs"
    train = run(
        "-m",
        "oml_core.cli",
        "train",
        f"logs_root={logs}",
        "extractor.name=acme_net",
        "criterion.name=acme_center",
        "+metric_args.acme_recall_top_k=[1]",
        "max_epochs=1",
        "validate_before_training=false",
        "lightning_trainer_extra_args.enable_progress_bar=false",
        "+lightning_trainer_extra_args.limit_train_batches=1",
        "transforms_train.args.im_size=32",
        "transforms_val.args.im_size=32",
    )
    assert re.search(r"^OVERALL/acme_recall/1\s+\d\.\d{4}", train, re.MULTILINE), train
    (run_dir,) = logs.iterdir()
    state = torch.load(run_dir / "checkpoints" / "best.ckpt", map_location="cpu", weights_only=True)[
        "state_dict"
    ]
    assert {key.split(".")[1] for key in state if key.startswith("extractor.")} == {"backbone", "head"}
