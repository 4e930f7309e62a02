"""Output paths from a config stay under their root: ``logs_folder`` (and the default folder made of ``postfix``)
inside ``logs_root``, a logger's relative ``save_dir`` inside the run directory and its ``name``/``version``
inside ``save_dir``, the figure files inside the figures folder. ``..``, an absolute path and a symbolic link
leading out are refused in one line naming the key, before anything is created."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from oml_core.cli import main
from oml_core.engine import make_run_dir, named_run_dir, path_inside, run_dir_path
from oml_core.interfaces.metrics import IMetricVisualisable
from oml_core.lightning.callbacks.metric import save_figures
from oml_core.lightning.pipelines.shared.common import build_logger
from oml_core.registry import ConfigError, Registry

REGISTRY = Registry()


@pytest.fixture()
def outside(tmp_path: Path) -> Path:
    """A folder next to ``logs_root`` (``tmp_path/logs``) that nothing may write into."""
    folder = tmp_path / "outside"
    folder.mkdir()
    return folder


def files_under(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*"))


@pytest.mark.parametrize(
    "logs_folder, message",
    [
        (
            "../outside/run",
            "logs_folder: '../outside/run' goes up with '..'; it names a folder inside logs_root ({logs})",
        ),
        (
            "run/../../outside",
            "logs_folder: 'run/../../outside' goes up with '..'; it names a folder inside logs_root",
        ),
        (
            "{outside}/run",
            "logs_folder: '{outside}/run' is an absolute path; it names a folder inside logs_root ({logs})",
        ),
        (
            "link/run",
            "logs_folder: 'link/run' leads to '{outside}/run' through a symbolic link, outside logs_root ({logs})",
        ),
        (".", "logs_folder: '.' is logs_root ({logs}) itself; it names a folder inside it"),
    ],
    ids=["dot-dot", "dot-dot-inside", "absolute", "symlink", "logs_root-itself"],
)
def test_a_logs_folder_outside_logs_root_is_one_line_and_nothing_is_written(
    logs_folder, message, tmp_path, outside, capsys
):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "link").symlink_to(outside, target_is_directory=True)
    folder = logs_folder.format(outside=outside)
    assert main(["train", f"logs_root={logs}", f"logs_folder={folder}"]) == 2
    expected = "oml train: error: " + message.format(outside=outside, logs=repr(str(logs)))
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(expected)
    assert files_under(outside) == [] and files_under(logs) == [logs / "link"]


def test_a_postfix_leading_out_of_logs_root_is_refused(tmp_path, capsys):
    logs = tmp_path / "logs"
    assert main(["train", f"logs_root={logs}", "postfix=x/../../../escaped"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert re.fullmatch(
        r"oml train: error: postfix: '\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_x/\.\./\.\./\.\./escaped' goes up with '\.\.'; "
        r"it names a folder inside logs_root \(.*\)",
        line,
    )
    assert files_under(tmp_path) == []


def test_run_folders_inside_logs_root_are_made_there(tmp_path):
    logs = tmp_path / "logs"
    assert make_run_dir(logs, "", "group/run") == logs / "group" / "run"
    assert make_run_dir(logs, "", "group/run") == logs / "group" / "run_1"  # never an earlier run's folder
    assert named_run_dir(logs, "group/run") == logs / "group" / "run"
    assert named_run_dir(logs, None) is None
    assert run_dir_path(logs, "tiny", stamp="2024-01-02_03-04-05") == logs / "2024-01-02_03-04-05_tiny"
    (logs / "inner").mkdir()
    (logs / "alias").symlink_to(logs / "inner", target_is_directory=True)  # a link inside logs_root is fine
    assert make_run_dir(logs, "", "alias/run") == logs / "inner" / "run"
    # an absolute logs_root (or one with ~) is the user's choice
    assert path_inside("~", "x", "logs_folder", "logs_root") == Path.home() / "x"


def test_make_run_dir_refuses_before_creating_anything(tmp_path, outside):
    with pytest.raises(ConfigError, match=r"^logs_folder: '\.\./outside' goes up with '\.\.'"):
        make_run_dir(tmp_path / "logs", "", "../outside")
    with pytest.raises(ConfigError, match=r"^logs_folder: '/abs/run' is an absolute path"):
        named_run_dir(tmp_path / "logs", "/abs/run")
    assert files_under(tmp_path) == [outside]


@pytest.mark.parametrize(
    "args, message",
    [
        (
            {"save_dir": "../tb"},
            "logger.args.save_dir: '../tb' goes up with '..'; it names a folder inside the run dir ('{run}')",
        ),
        (
            {"save_dir": "escape/tb"},
            "logger.args.save_dir: 'escape/tb' leads to '{outside}/tb' through a symbolic link, outside the run "
            "dir ('{run}')",
        ),
        (
            {"save_dir": ".", "name": "../../outside"},
            "logger.args: 'tensorboard' would write into '{run}/../../outside/version_0', outside its save_dir "
            "('{run}'); its name, version and sub_dir name folders inside save_dir",
        ),
        (
            {"save_dir": "tb", "version": "../../x"},
            "logger.args: 'tensorboard' would write into '{run}/tb/../../x', outside its save_dir ('{run}/tb')",
        ),
    ],
    ids=["save_dir-dot-dot", "save_dir-symlink", "name-dot-dot", "version-dot-dot"],
)
def test_a_logger_writes_inside_the_run_directory(args, message, tmp_path, outside):
    run_dir = tmp_path / "logs" / "run"
    run_dir.mkdir(parents=True)
    (run_dir / "escape").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ConfigError) as error:
        build_logger(REGISTRY, {"name": "tensorboard", "args": args}, run_dir)
    assert str(error.value).startswith(message.format(run=run_dir, outside=outside))
    assert files_under(outside) == [] and files_under(tmp_path / "logs") == [run_dir, run_dir / "escape"]


def test_a_logger_inside_the_run_directory_or_at_an_absolute_save_dir_is_built(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    logger = build_logger(
        REGISTRY, {"name": "tensorboard", "args": {"save_dir": "tb", "name": "exp"}}, run_dir
    )
    assert Path(logger.log_dir) == run_dir / "tb" / "exp" / "version_0"
    elsewhere = tmp_path / "shared_tensorboard"
    logger = build_logger(REGISTRY, {"name": "tensorboard", "args": {"save_dir": str(elsewhere)}}, run_dir)
    assert Path(logger.log_dir) == elsewhere / "version_0"


class TitledMetric(IMetricVisualisable):
    """A metric (of a plugin, say) whose figure titles hold path separators and ``..``."""

    def __init__(self, titles: list[str]) -> None:
        self.titles = titles

    def setup(self, *args, **kwargs) -> None: ...

    def update(self, *args, **kwargs) -> None: ...

    def compute_metrics(self) -> dict:
        return {}

    def visualize(self) -> tuple[list[Figure], list[str]]:
        return [Figure() for _ in self.titles], self.titles


def test_figure_files_stay_in_the_figures_folder(tmp_path):
    folder = tmp_path / "run" / "figures"
    titles = ["../../escaped", "/abs/name", "a\\b", "top 5 worst by OVERALL_cmc_1", "..", "fnmr@fmr=0.1"]
    paths = save_figures(TitledMetric(titles), folder, [], 0)
    names = [".._.._escaped", "_abs_name", "a_b", "top_5_worst_by_OVERALL_cmc_1", "..", "fnmr@fmr=0.1"]
    assert paths == [folder / f"{name}.png" for name in names]
    assert files_under(tmp_path) == sorted([tmp_path / "run", folder, *paths])
