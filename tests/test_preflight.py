"""The checks made before training (``oml_core.lightning.pipelines.shared.preflight``), each on real bad input: broken
image files (unreadable, truncated, empty, a decompression bomb), boxes outside their images, validation
splits without ground truth, an unknown checkpointing metric, an unwritable or too small logs folder, and an
accelerator this machine does not have."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from PIL import Image

from oml_core.datasets.image_checks import check_images
from oml_core.lightning.pipelines.shared.preflight import (
    CHECKPOINTS_ROOM,
    check_engine,
    check_logs_root,
    check_metric_for_checkpointing,
    check_resume_checkpoint,
    check_validation_ground_truth,
    checkpoint_size,
)
from oml_core.registry import ConfigError
from oml_core.utils.images import imread_pil

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from bad_images import decompression_bomb  # noqa: E402


@pytest.fixture()
def images(tmp_path: Path) -> dict[str, Path]:
    good = tmp_path / "good.png"
    Image.new("RGB", (40, 30), (200, 10, 10)).save(good)
    truncated = tmp_path / "truncated.png"
    truncated.write_bytes(good.read_bytes()[:60])
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    text = tmp_path / "text.png"
    text.write_text("not an image")
    return {
        "good": good,
        "truncated": truncated,
        "empty": empty,
        "text": text,
        "bomb": decompression_bomb(tmp_path / "bomb.png"),
        "missing": tmp_path / "missing.png",
    }


def test_good_images_pass_with_no_warning(images):
    assert check_images([images["good"]] * 3, imread_pil, 2, "train", progress_bar=False) == []


@pytest.mark.parametrize(
    ("name", "cause"),
    [
        ("truncated", "cannot read the image file"),
        ("empty", "cannot read the image file"),
        ("text", "cannot read the image file"),
        ("bomb", "could be decompression bomb"),
        ("missing", "image file not found"),
    ],
)
def test_each_broken_file_is_named_with_its_row_and_cause(images, name, cause):
    paths = [images["good"], images[name], images["good"]]
    with pytest.raises(ConfigError) as caught:
        check_images(paths, imread_pil, 2, "train", progress_bar=False, rows=[4, 9, 12])
    message = str(caught.value)
    assert message.startswith(f"train: 1 of 3 image files cannot be read: row 9 {str(images[name])!r} (")
    assert cause in message and "\n" not in message


def test_many_broken_files_are_counted_and_the_first_five_named(images):
    paths = [images["text"]] * 7
    with pytest.raises(
        ConfigError, match=r"^p: 7 of 7 image files cannot be read: .*; and 2 more$"
    ) as caught:
        check_images(paths, imread_pil, 1, "p", progress_bar=False, rows=list(range(7)))
    assert str(caught.value).count("row ") == 5


def test_a_box_outside_its_image_is_an_error_by_row_and_one_across_its_edge_a_warning(images):
    paths = [images["good"]] * 3  # 40 x 30
    with pytest.raises(ConfigError) as caught:
        check_images(
            paths, imread_pil, 1, "p", False, bboxes=[None, (0, 0, 10, 10), (45, 0, 50, 10)], rows=[1, 2, 3]
        )
    assert str(caught.value) == (
        f"p: 1 boxes lie outside their images: row 3 {str(images['good'])!r}: (45, 0, 50, 10) in a 40x30 image"
    )
    found = check_images(
        paths, imread_pil, 1, "p", False, bboxes=[(0, 0, 40, 30), (30, 20, 41, 30), None], rows=[1, 2, 3]
    )
    assert found == [
        f"1 boxes cross the edge of their images (cropped to them): row 2 {str(images['good'])!r}: "
        f"(30, 20, 41, 30) in a 40x30 image"
    ]


@pytest.mark.parametrize(
    ("labels", "queries", "gallery", "expected"),
    [
        ([0, 0, 1], [], [0, 1, 2], "the validation rows have 0 queries and 3 gallery items; both are needed"),
        ([0, 0, 1], [0, 1], [], "the validation rows have 2 queries and 0 gallery items; both are needed"),
        ([0, 1, 2, 2], [0, 1], [2, 3], "none of the 2 validation queries has a gallery item with its label"),
        ([0, 1, 2], [0, 1], [0, 1], "none of the 2 validation queries has a gallery item with its label"),
    ],
)
def test_a_validation_split_without_ground_truth_is_refused(labels, queries, gallery, expected):
    with pytest.raises(ConfigError, match=f"^df.csv: {expected}"):
        check_validation_ground_truth(labels, queries, gallery, "df.csv")


def test_one_query_with_ground_truth_is_enough():
    check_validation_ground_truth([0, 1, 1, 2], [0, 1], [0, 2, 3], "df.csv")  # query 1 finds item 2
    check_validation_ground_truth([0, 0], [0, 1], [0, 1], "df.csv")  # 1 vs rest


def test_the_checkpointing_metric_must_be_one_the_run_logs():
    keys = ["OVERALL/cmc/1", "OVERALL/cmc/5", "OVERALL/map/5"]
    check_metric_for_checkpointing("OVERALL/cmc/5", keys)
    check_metric_for_checkpointing("loss_epoch", keys)  # a training log: known once training runs
    with pytest.raises(ConfigError) as caught:
        check_metric_for_checkpointing("OVERALL/cmc/7", keys)
    assert str(caught.value) == (
        "metric_for_checkpointing: 'OVERALL/cmc/7' is not among the validation metrics of this config; did you "
        "mean 'OVERALL/cmc/5' or 'OVERALL/cmc/1' or 'OVERALL/map/5'? (they are: OVERALL/cmc/1, OVERALL/cmc/5, "
        "OVERALL/map/5)"
    )


def test_logs_root_is_made_and_must_be_a_writable_directory_with_room(tmp_path):
    assert check_logs_root(tmp_path / "a" / "b", 1000) == tmp_path / "a" / "b"
    assert (tmp_path / "a" / "b").is_dir() and list((tmp_path / "a" / "b").iterdir()) == []
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(ConfigError, match=f"^logs_root: {str(a_file)!r} is a file, not a directory$"):
        check_logs_root(a_file, 1000)
    with pytest.raises(ConfigError, match=r"^logs_root: cannot write into '/proc/forbidden': No such file"):
        check_logs_root("/proc/forbidden", 1000)
    petabyte = 1024**5
    with pytest.raises(
        ConfigError,
        match=rf"free, but the checkpoints of this model need 3072.0 TB \({CHECKPOINTS_ROOM} x 1024.0 TB: ",
    ):
        check_logs_root(tmp_path, petabyte)


def test_checkpoint_size_counts_parameters_optimizer_states_and_buffers():
    model = torch.nn.Sequential(torch.nn.Linear(10, 5), torch.nn.BatchNorm1d(5))
    params = (10 * 5 + 5 + 5 + 5) * 4  # weight, bias, bn weight, bn bias
    buffers = (5 + 5) * 4 + 8  # running mean and var (float32), num_batches_tracked (int64)
    assert checkpoint_size([model]) == params * 3 + buffers
    assert checkpoint_size([model], optimizer_states=0) == params + buffers


def test_an_accelerator_or_devices_this_machine_lacks_is_refused():
    if not torch.cuda.is_available():
        with pytest.raises(
            ConfigError, match=r"^accelerator: 'gpu', but this machine has no CUDA GPU \(use cpu\)$"
        ):
            check_engine({"accelerator": "gpu", "devices": 1}, 32)
    else:  # a GPU machine: ask for one GPU more than it has
        wanted = torch.cuda.device_count() + 1
        with pytest.raises(
            ConfigError, match=rf"^devices: {wanted}, but this machine has {wanted - 1} CUDA GPU"
        ):
            check_engine({"accelerator": "gpu", "devices": wanted}, 32)


def test_a_precision_lightning_refuses_on_this_accelerator_names_the_keys():
    with pytest.raises(ConfigError, match=r"^accelerator='cpu', devices=1, precision='banana': "):
        check_engine({"accelerator": "cpu", "devices": 1}, "banana")
    check_engine({"accelerator": "cpu", "devices": 1}, "bf16-mixed")


class RunsCode:
    """Pickled, this runs ``touch <marker>`` when it is unpickled without ``weights_only``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        import os

        return os.system, (f"touch {self.marker}",)


def test_resume_names_a_directory_a_link_loop_a_dangling_link_and_a_text_file_as_what_they_are(tmp_path):
    (tmp_path / "loop.ckpt").symlink_to(tmp_path / "loop.ckpt")
    (tmp_path / "dangling.ckpt").symlink_to(tmp_path / "gone.ckpt")
    (tmp_path / "notes.ckpt").write_text("101 epochs\n")
    expected = {
        tmp_path: f"resume: the checkpoint {str(tmp_path)!r} is a directory, not a file (resume takes a run's "
        "checkpoints/last.ckpt)",
        tmp_path
        / "loop.ckpt": f"resume: the checkpoint {str(tmp_path / 'loop.ckpt')!r} is a symbolic link loop",
        tmp_path
        / "dangling.ckpt": f"resume: the checkpoint {str(tmp_path / 'dangling.ckpt')!r} is a symbolic "
        f"link to {str(tmp_path / 'gone.ckpt')!r}, which does not exist",
        tmp_path / "notes.ckpt": f"resume: {str(tmp_path / 'notes.ckpt')!r} is not a checkpoint written by "
        "torch.save (neither a zip archive nor a pickle): it begins with b'101 epochs\\n'",
    }
    for path, message in expected.items():
        with pytest.raises(ConfigError) as caught:
            check_resume_checkpoint(path)
        assert str(caught.value) == message
    assert (tmp_path / "notes.ckpt").read_text() == "101 epochs\n"


def test_resume_needs_a_whole_training_checkpoint_of_tensors_and_plain_data(tmp_path):
    good = tmp_path / "last.ckpt"
    torch.save({"state_dict": {"w": torch.ones(2)}, "optimizer_states": [], "loops": {}, "epoch": 0}, good)
    check_resume_checkpoint(good)

    with pytest.raises(
        ConfigError, match=f"^resume: the checkpoint {str(tmp_path / 'no.ckpt')!r} does not exist$"
    ):
        check_resume_checkpoint(tmp_path / "no.ckpt")

    malicious, marker = tmp_path / "malicious.ckpt", tmp_path / "ran"
    torch.save({"state_dict": RunsCode(marker)}, malicious)
    with pytest.raises(ConfigError) as caught:
        check_resume_checkpoint(malicious)
    assert str(caught.value) == (
        f"resume: {str(malicious)!r} holds objects other than tensors and plain data; it is refused "
        f"(checkpoints are loaded with torch.load(weights_only=True), which never runs their code)"
    )
    assert not marker.exists()

    truncated = tmp_path / "truncated.ckpt"
    truncated.write_bytes(good.read_bytes()[:200])
    with pytest.raises(
        ConfigError, match=rf"^resume: cannot read the checkpoint {str(truncated)!r}: RuntimeError: "
    ):
        check_resume_checkpoint(truncated)

    weights = tmp_path / "weights.pth"
    torch.save({"w": torch.ones(2)}, weights)
    with pytest.raises(ConfigError) as caught:
        check_resume_checkpoint(weights)
    assert str(caught.value) == (
        f"resume: {str(weights)!r} is not a training checkpoint (it lacks state_dict, optimizer_states, loops); "
        f"resume from a run's checkpoints/last.ckpt, or give a model's weights as extractor.args.weights"
    )
