"""The reports: each pipeline returns its result and neither prints nor logs a report; ``oml COMMAND`` prints the
report of :mod:`oml_core.reports.pipelines` of that result. The report functions on hand-made results (the exact text),
then real runs: the pipelines called from Python (their log records at INFO and stdout hold no report line)
and ``oml train`` / ``oml validate`` in process (their stdout holds the report, their log records do not)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from oml_core.cli import main
from oml_core.lightning.pipelines import extractor_training_pipeline, extractor_validation_pipeline
from oml_core.lightning.pipelines.predict import PredictionResult
from oml_core.lightning.pipelines.shared.embeddings_cache import EmbeddingsSource
from oml_core.lightning.pipelines.train import TrainingResult
from oml_core.lightning.pipelines.train_postprocessor import PostprocessorTrainingResult
from oml_core.lightning.pipelines.validate import ValidationResult
from oml_core.lightning.pipelines.validate_postprocessor import PostprocessorValidationResult
from oml_core.reports.pipelines import (
    REPORTS,
    format_metrics_table,
    postprocessor_training_report,
    postprocessor_validation_report,
    prediction_report,
    training_report,
    validation_report,
)

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from tiny_training import tiny_config  # noqa: E402

RUN = Path("/runs/r")
#: The rule and header of a two-column table whose longest key is ``OVERALL/cmc/1`` (13 characters).
RULE_13 = "-" * 25
HEADER_13 = f"metric{' ' * 12}value"
#: The lines that only a report has: a table's title, the paths of a run.
REPORT_MARKS = (
    "Validation metrics",
    "Run directory:",
    "Logs:",
    "Best checkpoint:",
    "Last checkpoint:",
    "predictions have been saved",
    "Metrics before post-processing",
)


# ---------------------------------------------------------------------------------------- the text of each report
def test_the_training_report_has_the_table_the_regression_warning_and_the_paths():
    result = TrainingResult(
        metrics={"OVERALL/cmc/1": 0.5},
        run_dir=RUN,
        log_dir=RUN / "version_0",
        best_checkpoint=RUN / "checkpoints" / "best.ckpt",
        last_checkpoint=RUN / "checkpoints" / "last.ckpt",
        epochs={0: {"OVERALL/cmc/1": 0.75}, 1: {"OVERALL/cmc/1": 0.625}, 2: {"OVERALL/cmc/1": 0.5}},
        best_epoch=1,
        metric_for_checkpointing="OVERALL/cmc/1",
        mode_for_checkpointing="max",
        resumed_from=Path("logs/first/checkpoints/last.ckpt"),
    )
    # key column 13 wide; columns 15, 14, 14 wide (their headers), each after two spaces: 13 + 17 + 16 + 16
    rule = "-" * 62
    assert training_report(result).splitlines() == [
        "",
        "Validation metrics",
        rule,
        f"metric{' ' * 9}start (epoch 0)  best (epoch 1)  last (epoch 2)",
        rule,
        f"OVERALL/cmc/1{' ' * 11}0.7500{' ' * 10}0.6250{' ' * 10}0.5000",
        rule,
        "Training made OVERALL/cmc/1 worse than the initial weights: 0.7500 before training, 0.6250 at best "
        "(epoch 1); best.ckpt holds epoch 1, the initial weights are what the extractor's config loads.",
        "Resumed from:     logs/first/checkpoints/last.ckpt",
        "Run directory:    /runs/r",
        "Logs:             /runs/r/version_0",
        "Best checkpoint:  /runs/r/checkpoints/best.ckpt (epoch 1)",
        "Last checkpoint:  /runs/r/checkpoints/last.ckpt",
    ]
    # on a loss (mode min) the same numbers got better: no warning
    assert "Training made" not in training_report(
        TrainingResult(**{**result.__dict__, "mode_for_checkpointing": "min"})
    )


def test_the_validation_report_has_the_table_and_the_paths_and_the_figures_when_drawn():
    result = ValidationResult(
        metrics={"OVERALL/map/5": 0.5, "OVERALL/cmc/1": 0.875},
        run_dir=RUN,
        log_dir=RUN / "version_0",
        figures=[RUN / "figures" / "cmc_1.png", RUN / "figures" / "map_5.png"],
    )
    table = [
        "Validation metrics",
        RULE_13,
        HEADER_13,
        RULE_13,
        "OVERALL/cmc/1    0.8750",
        "OVERALL/map/5    0.5000",
        RULE_13,
    ]
    paths = ["Run directory:    /runs/r", "Logs:             /runs/r/version_0"]
    assert validation_report(result).splitlines() == [
        "",
        *table,
        *paths,
        "Figures:          /runs/r/figures (2 PNG files)",
    ]
    assert validation_report(ValidationResult(result.metrics, RUN, RUN / "version_0", [])).splitlines() == [
        "",
        *table,
        *paths,
    ]


def test_the_prediction_report_is_omls_line():
    result = PredictionResult(
        predictions_path=RUN / "predictions.json", paths=["a.png", "b.png", "c.png"], feat_dim=4
    )
    assert prediction_report(result) == "3 predictions have been saved to /runs/r/predictions.json"


def test_the_postprocessing_reports_have_both_tables_and_the_paths():
    before = [
        "",
        "Metrics before post-processing (the extractor's embeddings only)",
        RULE_13,
        HEADER_13,
        RULE_13,
    ]
    before += ["OVERALL/cmc/1    0.5000", RULE_13]
    after = ["", "Metrics after post-processing (pairwise_reranker)", RULE_13, HEADER_13, RULE_13]
    after += ["OVERALL/cmc/1    0.7500", RULE_13]
    trained = PostprocessorTrainingResult(
        metrics={"OVERALL/cmc/1": 0.75},
        metrics_before={"OVERALL/cmc/1": 0.5},
        run_dir=RUN,
        log_dir=RUN / "version_0",
        best_checkpoint=RUN / "checkpoints" / "best.ckpt",
        last_checkpoint=RUN / "checkpoints" / "last.ckpt",
        embeddings=[EmbeddingsSource("train", None, False), EmbeddingsSource("validation", None, False)],
        best_epoch=2,
        postprocessor="pairwise_reranker",
    )
    assert postprocessor_training_report(trained).splitlines() == [
        *before,
        *after,
        "Run directory:    /runs/r",
        "Logs:             /runs/r/version_0",
        "Best checkpoint:  /runs/r/checkpoints/best.ckpt (epoch 2)",
        "Last checkpoint:  /runs/r/checkpoints/last.ckpt",
    ]
    validated = PostprocessorValidationResult(
        metrics={"OVERALL/cmc/1": 0.75},
        metrics_before={"OVERALL/cmc/1": 0.5},
        run_dir=RUN,
        log_dir=RUN / "version_0",
        figures=[],
        embeddings=EmbeddingsSource("validation", None, False),
        postprocessor="pairwise_reranker",
    )
    assert postprocessor_validation_report(validated).splitlines() == [
        *before,
        *after,
        "Run directory:    /runs/r",
        "Logs:             /runs/r/version_0",
    ]


def test_every_pipeline_command_has_a_report():
    from oml_core.cli.pipelines import PIPELINE_CONFIGS

    assert set(REPORTS) == set(PIPELINE_CONFIGS.values())


# ------------------------------------------------------------------------------------------------- real runs
@pytest.fixture()
def oml_records() -> Iterator[list[str]]:
    """The messages of the ``oml_core`` loggers at INFO and above meanwhile (the package logger does not
    propagate to the root, so that caplog would not see them)."""
    seen: list[str] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    package = logging.getLogger("oml_core")
    package.addHandler(handler)
    yield seen
    package.removeHandler(handler)


def report_lines(text: str) -> list[str]:
    """The lines of ``text`` that only a report has (:data:`REPORT_MARKS`, a metric row of a table)."""
    return [
        line
        for line in text.splitlines()
        if line.startswith("OVERALL/") or any(mark in line for mark in REPORT_MARKS)
    ]


@pytest.mark.slow
def test_the_pipelines_report_nothing_and_oml_prints_their_reports(
    tmp_path, oml_cache_dir, monkeypatch, capsys, oml_records
):
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    cfg = tiny_config(tmp_path / "python", max_epochs=1)
    trained = extractor_training_pipeline(cfg)
    validation_cfg = {
        key: cfg[key]
        for key in (
            "accelerator",
            "dataframe_name",
            "transforms_val",
            "bs_val",
            "metric_args",
            "lightning_trainer_extra_args",
        )
    }
    validation_cfg["extractor"] = {
        **cfg["extractor"],
        "args": {"feat_dim": 16, "weights": str(trained.best_checkpoint)},
    }
    validated = extractor_validation_pipeline(
        {**validation_cfg, "logs_root": str(tmp_path / "python_validation")}
    )
    out = capsys.readouterr().out
    assert "Checked 192 images" in out and "Checked 192 images" in "\n".join(oml_records)  # the capture works
    assert report_lines(out) == [] and report_lines("\n".join(oml_records)) == []
    assert trained.is_main_process and validated.is_main_process
    oml_records.clear()

    # the same runs through `oml`: the reports of the same results, printed and not logged
    (tmp_path / "train.yaml").write_text(yaml.safe_dump({**cfg, "logs_root": str(tmp_path / "cli")}))
    assert main(["train", "--config-path", str(tmp_path), "--config-name", "train"]) == 0
    out = capsys.readouterr().out
    (run_dir,) = (tmp_path / "cli").iterdir()
    printed = training_report(
        TrainingResult(
            **{
                **trained.__dict__,
                "run_dir": run_dir,
                "log_dir": run_dir / "version_0",
                "best_checkpoint": run_dir / "checkpoints" / "best.ckpt",
                "last_checkpoint": run_dir / "checkpoints" / "last.ckpt",
            }
        )
    )
    assert out.endswith(f"{printed}\n")  # the same seed and data: the same metrics
    assert out.count("Best checkpoint:") == 1
    assert report_lines("\n".join(oml_records)) == []

    (tmp_path / "validate.yaml").write_text(
        yaml.safe_dump({**validation_cfg, "logs_root": str(tmp_path / "cli_validation")})
    )
    assert main(["validate", "--config-path", str(tmp_path), "--config-name", "validate"]) == 0
    out = capsys.readouterr().out
    (validation_dir,) = (tmp_path / "cli_validation").iterdir()
    assert out.endswith(
        f"\n{format_metrics_table(validated.metrics)}\nRun directory:    {validation_dir}\n"
        f"Logs:             {validation_dir / 'version_0'}\n"
    )
    assert report_lines("\n".join(oml_records)) == []
