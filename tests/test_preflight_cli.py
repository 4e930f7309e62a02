"""``oml train`` on bad input, through the command line (``oml_core.cli.main``; a few cases as the console
script in a subprocess): every case ends before any epoch (in seconds, nothing trained, no checkpoint
written) with exactly one line on stderr naming the file, row or key at fault and a non-zero exit, never a
traceback. The data are copies of the mock dataset with real damage: broken image files in the validation
split, a box outside its image, no queries, a symbolic link loop; and bad checkpoints given to resume (a text file,
a directory, a symbolic link loop among them)."""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from bad_images import decompression_bomb  # noqa: E402

from oml_core.cli import main
from oml_core.datasets.mock import get_mock_dataset_root
from tests.scripts.devices import no_gpu_case

FIRST_VALIDATION_ROW = 128  # the mock csv: 128 train rows, then 64 validation rows
FAST = ("max_epochs=1", "valid_period=1", "lightning_trainer_extra_args.enable_progress_bar=false")


def _val_image(root: Path) -> Path:
    return root / pd.read_csv(root / "df.csv")["path"][FIRST_VALIDATION_ROW]


def damage_truncated(root: Path) -> str:
    image = _val_image(root)
    image.write_bytes(image.read_bytes()[:100])
    return f"row {FIRST_VALIDATION_ROW} {str(image)!r}"


def damage_empty(root: Path) -> str:
    _val_image(root).write_bytes(b"")
    return f"row {FIRST_VALIDATION_ROW} {str(_val_image(root))!r}"


def damage_not_an_image(root: Path) -> str:
    _val_image(root).write_text("hello")
    return f"row {FIRST_VALIDATION_ROW} {str(_val_image(root))!r}"


def damage_bomb(root: Path) -> str:
    decompression_bomb(_val_image(root))
    return "could be decompression bomb"


def damage_box(root: Path) -> str:
    df = pd.read_csv(root / "df_with_bboxes.csv")
    row = FIRST_VALIDATION_ROW + 3
    df.loc[row, ["x_1", "x_2"]] = [500, 510]  # the mock images are 64 x 64
    df.to_csv(root / "df_with_bboxes.csv", index=False)
    return f"boxes lie outside their images: row {row} "


def damage_no_queries(root: Path) -> str:
    df = pd.read_csv(root / "df.csv")
    df.loc[df["split"] == "validation", "is_query"] = False
    df.to_csv(root / "df.csv", index=False)
    return "no queries"


def malicious_checkpoint(root: Path) -> str:
    """A checkpoint holding a pickled call of ``os.system`` (refused, never run)."""
    import torch

    class RunsCode:
        def __reduce__(self):
            import os

            return os.system, (f"touch {root / 'ran'}",)

    torch.save({"state_dict": RunsCode()}, root / "malicious.ckpt")
    return f"resume: {str(root / 'malicious.ckpt')!r} holds objects other than tensors and plain data"


def truncated_checkpoint(root: Path) -> str:
    import torch

    torch.save({"state_dict": {"w": torch.ones(100)}, "optimizer_states": [], "loops": {}}, root / "t.ckpt")
    (root / "t.ckpt").write_bytes((root / "t.ckpt").read_bytes()[:300])
    return f"resume: cannot read the checkpoint {str(root / 't.ckpt')!r}: RuntimeError: "


def damage_link_loop(root: Path) -> str:
    """The validation row's image replaced by a symbolic link to itself."""
    image = _val_image(root)
    image.unlink()
    image.symlink_to(image.name)
    path = pd.read_csv(root / "df.csv")["path"][FIRST_VALIDATION_ROW]
    return f"column 'path': a symbolic link loop at row {FIRST_VALIDATION_ROW} ({path!r})"


def text_file_checkpoint(root: Path) -> str:
    (root / "notes.txt").write_text("hello, this is not a checkpoint\n")
    return (
        f"resume: {str(root / 'notes.txt')!r} is not a checkpoint written by torch.save (neither a zip archive "
        "nor a pickle): it begins with b'hello, this is not a che'"
    )


def directory_checkpoint(root: Path) -> str:
    return (
        f"resume: the checkpoint {str(root)!r} is a directory, not a file (resume takes a run's "
        "checkpoints/last.ckpt)"
    )


def link_loop_checkpoint(root: Path) -> str:
    (root / "last.ckpt").symlink_to(root / "loop.ckpt")
    (root / "loop.ckpt").symlink_to(root / "last.ckpt")
    return f"resume: the checkpoint {str(root / 'last.ckpt')!r} is a symbolic link loop"


CASES: dict[str, tuple[Callable[[Path], str] | None, tuple[str, ...]]] = {
    "truncated image": (damage_truncated, ()),
    "empty image": (damage_empty, ()),
    "not an image": (damage_not_an_image, ()),
    "decompression bomb": (damage_bomb, ()),
    "box outside its image": (damage_box, ("dataframe_name=df_with_bboxes.csv",)),
    "validation without queries": (damage_no_queries, ()),
    "unknown checkpointing metric": (None, ("metric_for_checkpointing=OVERALL/cmc/7",)),
    "gpu without a gpu": (None, tuple(no_gpu_case()[0])),
    "malicious pickle to resume": (malicious_checkpoint, ("resume={root}/malicious.ckpt",)),
    "truncated checkpoint to resume": (truncated_checkpoint, ("resume={root}/t.ckpt",)),
    "symbolic link loop in the dataframe": (damage_link_loop, ()),
    "text file to resume": (text_file_checkpoint, ("resume={root}/notes.txt",)),
    "directory to resume": (directory_checkpoint, ("resume={root}",)),
    "symbolic link loop to resume": (link_loop_checkpoint, ("resume={root}/last.ckpt",)),
    "logs_root in /proc": (None, ("logs_root=/proc/forbidden",)),
    "max_epochs=abc": (None, ("max_epochs=abc",)),
    "max_epochs=-3": (None, ("max_epochs=-3",)),
    "optimizer.args.lr=abc": (None, ("optimizer.args.lr=abc",)),
    "criterion.args.margin=abc": (None, ("criterion.args.margin=abc",)),
    "seed=abc": (None, ("seed=abc",)),
    "bs_val=-1": (None, ("bs_val=-1",)),
    "bs_val=0": (None, ("bs_val=0",)),
    "valid_period=0": (None, ("valid_period=0",)),
    "metric_args.cmc_top_k=[0]": (None, ("metric_args.cmc_top_k=[0]",)),
}
EXPECTED = {
    "unknown checkpointing metric": "metric_for_checkpointing: 'OVERALL/cmc/7' is not among the validation metrics",
    "gpu without a gpu": no_gpu_case()[1],
    "logs_root in /proc": "logs_root: cannot write into '/proc/forbidden': No such file or directory",
    "max_epochs=abc": "max_epochs: expected a positive int, got 'abc'",
    "max_epochs=-3": "max_epochs: expected a positive int, got -3",
    "optimizer.args.lr=abc": "optimizer.args.lr: expected float or Tensor, got 'abc'",
    "criterion.args.margin=abc": "criterion.args.margin: expected float or None, got 'abc'",
    "seed=abc": "seed: expected an int in [0, 4294967295], got 'abc'",
    "bs_val=-1": "bs_val: expected a positive int, got -1",
    "bs_val=0": "bs_val: expected a positive int, got 0",
    "valid_period=0": "valid_period: expected a positive int, got 0",
    "metric_args.cmc_top_k=[0]": "metric_args.cmc_top_k: expected a list of positive ints, got [0]",
}


@pytest.fixture(scope="module")
def mock_root(oml_cache_dir: Path) -> Path:
    return get_mock_dataset_root(oml_cache_dir)


#: The cases also run as the console script in a subprocess (the rest run ``oml_core.cli.main`` in process:
#: the same code, without 5 s of imports each).
IN_A_SUBPROCESS = ("decompression bomb", "max_epochs=abc")


def run_case(
    case: str, tmp_path: Path, mock_root: Path, run_oml, monkeypatch, capsys
) -> tuple[int, str, Path]:
    """Run ``oml train`` on the case's data and overrides: ``(exit status, stderr, what the error names)``."""
    damage, overrides = CASES[case]
    root = tmp_path / "data"
    shutil.copytree(mock_root, root)
    expected = damage(root) if damage is not None else EXPECTED[case]
    argv = [
        "train",
        f"dataset_root={root}",
        f"logs_root={tmp_path / 'logs'}",
        *FAST,
        *(override.format(root=root) for override in overrides),
    ]
    if case in IN_A_SUBPROCESS:
        done = run_oml(*argv)
        return done.returncode, done.stderr, expected
    monkeypatch.delenv("OML_TRACEBACK", raising=False)
    status = main(argv)
    return status, capsys.readouterr().err, expected


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_fails_before_training_with_one_line(
    case, run_oml, mock_root, tmp_path, monkeypatch, capsys
):
    started = time.monotonic()
    status, stderr, expected = run_case(case, tmp_path, mock_root, run_oml, monkeypatch, capsys)
    seconds = time.monotonic() - started

    assert status == 2, stderr[-2000:]
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("oml train: ")]
    assert len(errors) == 1, stderr[-2000:]
    assert errors[0].startswith("oml train: error: ") and expected in errors[0], errors[0]
    logs = tmp_path / "logs"
    assert not list(logs.rglob("*.ckpt")) and not list(logs.rglob("events.out.*"))  # nothing trained
    assert seconds < 30
    assert not (tmp_path / "data" / "ran").exists()  # the malicious checkpoint's code never ran


@pytest.mark.slow
def test_skip_image_check_goes_past_the_image_check(run_oml, mock_root, tmp_path):
    """With the check off, the broken image is found only when the validation loader reads it: still one
    line (the reader names the file), after the training epoch."""
    root = tmp_path / "data"
    shutil.copytree(mock_root, root)
    damage_not_an_image(root)
    done = run_oml(
        "train", "--skip-image-check", f"dataset_root={root}", f"logs_root={tmp_path / 'logs'}", *FAST
    )
    assert done.returncode != 0
    assert "Checked" not in done.stdout and "Traceback" not in done.stderr
    assert str(_val_image(root)) in done.stderr.splitlines()[-1]
