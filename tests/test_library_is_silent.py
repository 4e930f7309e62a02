"""Only the command line prints: the library logs (``oml_core`` loggers, :mod:`oml_core.utils.logs`), so that with
that logger silenced, a program that runs the pipelines from Python writes nothing to stdout."""

from __future__ import annotations

import ast
import logging
import sys
from pathlib import Path

import pytest

import oml_core
from oml_core.datasets.mock import get_mock_dataset_root
from oml_core.lightning.pipelines import (
    extractor_prediction_pipeline,
    extractor_training_pipeline,
    extractor_validation_pipeline,
)

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from tiny_training import IMAGE_ARGS, tiny_config  # noqa: E402

CORE = Path(oml_core.__file__).parent
#: The modules whose job is to print: the command line's.
PRINTING_MODULES = set((CORE / "cli").rglob("*.py"))


def print_calls(path: Path) -> list[int]:
    """The lines of ``path`` that call the builtin ``print``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"
    ]


def test_no_library_module_calls_print():
    found = {
        str(path.relative_to(CORE)): lines
        for path in sorted(CORE.rglob("*.py"))
        if path not in PRINTING_MODULES and (lines := print_calls(path))
    }
    assert found == {}


def test_the_check_sees_a_print(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    x = 1\n    print(x)\n    log.info(x)\n")
    assert print_calls(module) == [3]


@pytest.fixture()
def silenced():
    """The ``oml_core`` loggers silenced below warnings, as an application that wants no summaries does."""
    package = logging.getLogger("oml_core")
    level = package.level
    package.setLevel(logging.WARNING)
    yield
    package.setLevel(level)


@pytest.mark.slow
def test_pipelines_run_from_python_write_nothing_to_stdout(tmp_path, oml_cache_dir, capfd, silenced):
    root = str(get_mock_dataset_root(oml_cache_dir))
    cfg = tiny_config(tmp_path / "logs", dataset_root=root, max_epochs=1)
    trained = extractor_training_pipeline(cfg)
    transforms = {"name": "norm_resize", "args": IMAGE_ARGS}
    inference = {  # the keys the validation and the prediction share
        "dataset_root": root,
        "dataframe_name": "df.csv",
        "extractor": {"name": "tiny_conv", "args": {"feat_dim": 16, "weights": str(trained.best_checkpoint)}},
        "lightning_trainer_extra_args": {"enable_progress_bar": False},
        "accelerator": "cpu",
    }
    validated = extractor_validation_pipeline(
        {**inference, "transforms_val": transforms, "bs_val": 16, "logs_root": str(tmp_path / "validation")}
    )
    predicted = extractor_prediction_pipeline(
        {**inference, "transforms_predict": transforms, "bs": 32, "save_dir": str(tmp_path / "predictions")}
    )
    assert trained.metrics and validated.metrics and predicted.predictions_path.is_file()  # they did run
    assert capfd.readouterr().out == ""
