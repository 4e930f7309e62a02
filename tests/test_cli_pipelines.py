"""`oml validate` and `oml predict`: the train -> validate -> predict chain on the mock dataset as a user runs
it, the default configs, and the one-line errors."""

from __future__ import annotations

import json
import re

import pytest
import torch
from oml_models import ResnetExtractor

from oml_core.builtins.transforms import NormaliseResize
from oml_core.cli import main
from oml_core.datasets.mock import get_mock_dataset_root
from oml_core.utils.images import imread_pil

NO_PROGRESS_BAR = "lightning_trainer_extra_args.enable_progress_bar=false"
#: A row of the end-of-training table (start, best, last columns) or of validation's: the metric, last value.
METRIC_ROW = re.compile(r"^(OVERALL/\S+)\s+(?:\d+\.\d{4}\s+)*(\d+\.\d{4})$", re.MULTILINE)
TINY = "32"


def _metrics_table(stdout: str) -> dict[str, str]:
    return dict(METRIC_ROW.findall(stdout))


def _ok(result) -> str:
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def _features_of_the_checkpoint(checkpoint, paths) -> torch.Tensor:
    """The features of ``paths`` by the ResNet18 of a training checkpoint, computed here: the extractor's
    weights taken from the Lightning checkpoint by hand, the transform of the default configs applied."""
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)["state_dict"]
    extractor = ResnetExtractor(
        weights=None, arch="resnet18", gem_p=None, remove_fc=True, normalise_features=True
    )
    extractor.load_state_dict(
        {k.removeprefix("extractor."): v for k, v in state.items() if k.startswith("extractor.")}
    )
    transform = NormaliseResize(int(TINY))
    with torch.no_grad():
        return extractor.eval()(torch.stack([transform(imread_pil(path)) for path in paths]))


@pytest.mark.slow
def test_train_then_validate_then_predict_with_the_best_checkpoint(
    tiny_trained_run, run_oml, tmp_path, oml_cache_dir
):
    train, best = tiny_trained_run.stdout, tiny_trained_run.best_checkpoint
    assert best.is_file()

    validate = _ok(
        run_oml(
            "validate",
            f"logs_root={tmp_path / 'validate'}",
            NO_PROGRESS_BAR,
            f"transforms_val.args.im_size={TINY}",
            f"extractor.args.weights={best}",
        )
    )
    # the same data, transforms and weights: the metrics that training printed for its best checkpoint
    assert len(_metrics_table(train)) == 5
    assert _metrics_table(validate) == _metrics_table(train)
    (validation_dir,) = (tmp_path / "validate").iterdir()
    assert f"Run directory:    {validation_dir}" in validate

    predict = _ok(
        run_oml(
            "predict",
            f"save_dir={tmp_path / 'features'}",
            "bs=50",  # batches of unequal size
            NO_PROGRESS_BAR,
            f"transforms_predict.args.im_size={TINY}",
            f"extractor.args.weights={best}",
        )
    )
    predictions_path = tmp_path / "features" / "predictions.json"
    assert f"192 predictions have been saved to {predictions_path}" in predict
    predictions = json.loads(predictions_path.read_text())
    images = sorted((get_mock_dataset_root(oml_cache_dir) / "images").glob("*.jpg"))
    assert list(predictions) == [str(path) for path in images]
    assert {len(features) for features in predictions.values()} == {512}
    expected = _features_of_the_checkpoint(best, images)
    assert torch.allclose(torch.tensor(list(predictions.values())), expected, atol=1e-5, rtol=1e-4)


def test_oml_predict_runs_out_of_the_box(tmp_path, oml_cache_dir, monkeypatch, capsys):
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    overrides = [
        f"logs_root={tmp_path}",
        NO_PROGRESS_BAR,
        f"transforms_predict.args.im_size={TINY}",
    ]
    assert main(["predict", *overrides]) == 0
    (run_dir,) = tmp_path.iterdir()
    assert run_dir.name.endswith("_prediction")
    predictions = json.loads((run_dir / "predictions.json").read_text())
    images = sorted((get_mock_dataset_root(oml_cache_dir) / "images").glob("*.jpg"))
    assert list(predictions) == [str(path) for path in images]
    norms = torch.tensor(list(predictions.values())).norm(dim=1)  # random weights, normalised features
    assert norms.shape == (192,) and torch.allclose(norms, torch.ones(192), atol=1e-5)
    assert f"192 predictions have been saved to {run_dir / 'predictions.json'}" in capsys.readouterr().out


@pytest.mark.parametrize(
    "command, overrides, message",
    [
        (
            "validate",
            ["+bs_vall=8"],
            "extractor_validation_pipeline: unknown config key 'bs_vall'; did you mean 'bs_val'?",
        ),
        ("predict", ["extractor.name=resnett"], "Unknown extractor 'resnett'. Did you mean: resnet"),
        (
            "predict",
            ["extractor.args.weights=/no/such/best.ckpt"],
            "extractor_prediction_pipeline: config key 'extractor' ('resnet'): Checkpoint file not found: "
            "'/no/such/best.ckpt'",
        ),
        (
            "train",
            ["loss@criterion=arcface", "criterion.args.in_features=512", "criterion.args.num_classes=8"],
            "extractor_training_pipeline: criterion.args.num_classes=8, but the training labels range over "
            "[0, 15] (16 distinct): the loss needs labels 0 .. num_classes - 1",
        ),
        (
            "train",
            ["loss@criterion=arcface", "criterion.args.num_classes=16"],
            "extractor_training_pipeline: criterion.args.in_features=384, but the extractor gives 512-dimensional "
            "features: set criterion.args.in_features=512",
        ),
        (
            "train",
            ["sampler@sampler=category_balance"],
            "extractor_training_pipeline: config key 'sampler' ('category_balance'): label2category is None: this "
            "sampler needs a mapping from every label to its category (for a dataset, its 'category' column)",
        ),
        (
            "train",
            ["optimizer.args.lr=-1"],
            "extractor_training_pipeline: config key 'optimizer' ('adam'): Invalid learning rate: -1",
        ),
        (
            "validate",
            ["transforms_val.args.im_size=0"],
            "extractor_validation_pipeline: config key 'transforms_val' ('norm_resize'): im_size must be "
            "positive, got 0",
        ),
        (
            "validate",
            ["num_nodes=0"],
            "num_nodes: expected a positive int, got 0",
        ),
    ],
)
def test_bad_configs_exit_2_with_one_line(
    tmp_path, oml_cache_dir, monkeypatch, capsys, command, overrides, message
):
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    assert main([command, f"logs_root={tmp_path}", *overrides]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = [line for line in err.splitlines() if line.startswith("oml ")]  # progress bars aside
    assert line.startswith(f"oml {command}: error: ") and message in line
    assert not any(tmp_path.iterdir())


def test_only_the_upstream_warnings_users_cannot_act_on_are_silenced():
    import warnings

    from oml_core.lightning.quiet import silence_upstream_warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        silence_upstream_warnings()
        warnings.warn(
            "`isinstance(treespec, LeafSpec)` is deprecated, use `isinstance(treespec, TreeSpec)` instead.",
            FutureWarning,
            stacklevel=1,
        )
        warnings.warn("something else is deprecated", FutureWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["something else is deprecated"]
