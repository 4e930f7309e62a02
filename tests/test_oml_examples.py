"""OML 4.0's README and docs examples (those that OML's ``tests/test_runs/test_code_from_markdown.py`` runs) as they
run with oml: OML's code with ``oml`` -> ``oml_core`` in its imports, on the mock datasets that oml generates
locally. Between the ``# --- OML's example`` and ``# --- what it did`` lines of each test is the example; after them,
the checks of what it did, against naive computations where there is a number to check.

Changes besides the rename, the same in every test (nothing is downloaded in a test):

- OML downloads the ``vits16_dino`` weights (``ViTExtractor.from_pretrained("vits16_dino")``, or the zoo key as
  ``weights``): here the same architecture with random weights, ``ViTExtractor(weights=None, arch="vits16",
  normalise_features=False)`` (the zoo example saves random weights in the cache and loads them by the zoo key).
- Where OML resizes to 224 x 224 for that model (``get_transforms_for_pretrained("vits16_dino")``,
  ``get_normalisation_resize_torch(im_size=224)``), the images keep the mock's 64 x 64
  (``get_normalisation_resize_torch(im_size=64)``): a random ViT-S pass over the 64 validation images takes ~13 s at
  224 on this machine's CPU and ~1.5 s at 64.

The texts and audio examples are the plugins' (``plugins/oml_texts/tests/test_oml_examples.py``,
``plugins/oml_audio/tests/test_oml_examples.py``); those that need names the OML drop-in adds elsewhere
(``oml_core.lightning.ExtractorModule``, ``PairwiseReranker``, ``inference_cached``, the DDP pattern) are in
``tests/test_oml_examples_pending.py``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch


@pytest.fixture()
def oml_cache(oml_cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The session's cache as oml's cache (OML's default roots of the mock datasets are in it); the test runs in
    its own folder (Lightning's and the loggers' files go there); every figure is closed after the test."""
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    yield oml_cache_dir
    plt.close("all")


def naive_top(embeddings: torch.Tensor, query: int, k: int, allowed: list[int]) -> list[int]:
    """The ``k`` rows of ``allowed`` closest to row ``query`` by the euclidean distance, closest first."""
    distances = [(float(torch.dist(embeddings[query], embeddings[j])), j) for j in allowed]
    return [j for _, j in sorted(distances)[:k]]


def naive_cmc_at_1(retrieved: list[list[int]], labels: list[int]) -> float:
    """The share of queries (every row, "1 vs rest") whose first retrieved row has the query's label."""
    return float(np.mean([bool(ids) and labels[ids[0]] == labels[q] for q, ids in enumerate(retrieved)]))


def test_retrieval_usage(oml_cache: Path, capsys: pytest.CaptureFixture) -> None:
    """docs/readme/examples_source/extractor/retrieval_usage.md (random ViT-S at 64 x 64, see the module)."""
    # --- OML's example, `oml` -> `oml_core`; random weights, the mock's image size ---
    from oml_core.models import ViTExtractor
    from oml_core.transforms.images.torchvision import get_normalisation_resize_torch

    from oml_core.datasets import ImageQueryGalleryDataset
    from oml_core.inference import inference
    from oml_core.retrieval import AdaptiveThresholding, RetrievalResults
    from oml_core.utils import get_mock_images_dataset

    _, df_test = get_mock_images_dataset(global_paths=True)
    del df_test["label"]  # we don't need gt labels for doing predictions

    extractor = ViTExtractor(weights=None, arch="vits16", normalise_features=False).to("cpu")
    transform = get_normalisation_resize_torch(im_size=64)

    dataset = ImageQueryGalleryDataset(df_test, transform=transform)
    embeddings = inference(extractor, dataset, batch_size=4, num_workers=0)

    rr = RetrievalResults.from_embeddings(embeddings, dataset, n_items=5)
    rr = AdaptiveThresholding(n_std=3.5).process(rr)
    rr.visualize(query_ids=[0, 1], dataset=dataset, show=True)

    # you get the ids of retrieved items and the corresponding distances
    print(rr)
    # --- what it did ---
    assert embeddings.shape == (64, 384) and capsys.readouterr().out.strip()
    everything = RetrievalResults.from_embeddings(embeddings, dataset, n_items=5)
    for q in range(64):  # every row is a query and a gallery item; a query never retrieves itself
        expected = naive_top(embeddings, q, 5, [j for j in range(64) if j != q])
        assert everything.retrieved_ids[q].tolist() == expected
        kept = rr.retrieved_ids[q].tolist()
        assert kept == expected[: len(kept)]  # thresholding keeps a prefix


def test_retrieval_usage_streaming(oml_cache: Path, capsys: pytest.CaptureFixture) -> None:
    """docs/readme/examples_source/extractor/retrieval_usage_streaming.md (random ViT-S at 64 x 64)."""
    # --- OML's example, `oml` -> `oml_core`; random weights, the mock's image size ---
    from oml_core.models import ViTExtractor
    from oml_core.transforms.images.torchvision import get_normalisation_resize_torch

    from oml_core.datasets import ImageBaseDataset
    from oml_core.inference import inference
    from oml_core.retrieval import ConstantThresholding, RetrievalResults
    from oml_core.utils import get_mock_images_dataset

    extractor = ViTExtractor(weights=None, arch="vits16", normalise_features=False).to("cpu")
    transform = get_normalisation_resize_torch(im_size=64)

    paths = pd.concat(get_mock_images_dataset(global_paths=True))["path"]
    galleries, queries1, queries2 = paths[:20], paths[20:22], paths[22:24]

    # gallery is huge and fixed, so we only process it once
    dataset_gallery = ImageBaseDataset(galleries, transform=transform)
    embeddings_gallery = inference(extractor, dataset_gallery, batch_size=4, num_workers=0)

    answers = []
    # queries come "online" in stream
    for queries in [queries1, queries2]:
        dataset_query = ImageBaseDataset(queries, transform=transform)
        embeddings_query = inference(extractor, dataset_query, batch_size=4, num_workers=0)

        # for the operation below we are going to provide integrations with vector search DB like QDrant or Faiss
        rr = RetrievalResults.from_embeddings_qg(
            embeddings_query=embeddings_query,
            embeddings_gallery=embeddings_gallery,
            dataset_query=dataset_query,
            dataset_gallery=dataset_gallery,
        )
        rr = ConstantThresholding(th=80).process(rr)
        rr.visualize_qg([0, 1], dataset_query=dataset_query, dataset_gallery=dataset_gallery, show=True)
        print(rr)
        answers.append((embeddings_query, rr))
    # --- what it did ---
    assert len(capsys.readouterr().out.strip().splitlines()) >= 2
    for embeddings_query, rr in answers:
        for q in range(2):
            distances = torch.cdist(embeddings_query[q : q + 1], embeddings_gallery)[0]
            expected = [j for j in distances.argsort().tolist() if distances[j] < 80]
            assert rr.retrieved_ids[q].tolist() == expected
            assert rr.gt_ids is None


def test_train_and_validate_on_images(oml_cache: Path, capsys: pytest.CaptureFixture) -> None:
    """docs/readme/examples_source/extractor/train_val_all_modalities.md, images (random ViT-S at 64 x 64)."""
    # --- OML's example, `oml` -> `oml_core`; random weights, the mock's image size ---
    from oml_core.losses import TripletLossWithMiner
    from oml_core.miners import HardTripletsMiner
    from oml_core.models import ViTExtractor
    from oml_core.samplers import BalanceSampler
    from oml_core.transforms.images.torchvision import get_normalisation_resize_torch
    from torch.optim import Adam
    from torch.utils.data import DataLoader

    from oml_core import datasets as d
    from oml_core.inference import inference
    from oml_core.metrics import calc_retrieval_metrics_rr
    from oml_core.retrieval import AdaptiveThresholding, RetrievalResults
    from oml_core.utils import get_mock_images_dataset

    model = ViTExtractor(weights=None, arch="vits16", normalise_features=False).to("cpu").train()
    transform = get_normalisation_resize_torch(im_size=64)

    df_train, df_val = get_mock_images_dataset(global_paths=True)
    train = d.ImageLabeledDataset(df_train, transform=transform)
    val = d.ImageQueryGalleryLabeledDataset(df_val, transform=transform)

    optimizer = Adam(model.parameters(), lr=1e-4)
    criterion = TripletLossWithMiner(0.1, HardTripletsMiner(), need_logs=True)
    sampler = BalanceSampler(train.get_labels(), n_labels=2, n_instances=2)

    before = [p.detach().clone() for p in model.parameters()]
    logs = []
    # training 1 epoch
    for batch in DataLoader(train, batch_sampler=sampler):
        embeddings = model(batch["input_tensors"])
        loss = criterion(embeddings, batch["labels"])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        print(criterion.last_logs)
        logs.append(dict(criterion.last_logs))

    # validation by retrieving relevant items
    embeddings = inference(model, val, batch_size=4, num_workers=0)
    rr = RetrievalResults.from_embeddings(embeddings, val, n_items=3)
    rr = AdaptiveThresholding(n_std=2).process(rr)
    rr.visualize(query_ids=[2, 1], dataset=val, show=True)
    metrics = calc_retrieval_metrics_rr(rr, map_top_k=(3,), cmc_top_k=(1,))
    print(metrics)
    # --- what it did ---
    assert len(logs) == len(sampler) == 8  # 16 training labels, 2 a batch: each once an epoch
    assert all(set(log) >= {"active_tri", "pos_dist", "neg_dist"} for log in logs)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))  # it trained
    labels = df_val["label"].tolist()
    expected_cmc = naive_cmc_at_1([ids.tolist() for ids in rr.retrieved_ids], labels)
    assert metrics["cmc"][1] == pytest.approx(expected_cmc)  # no categories: OML's flat {metric: {k: value}}
    assert (
        set(metrics) == {"cmc", "map", "precision"} and 0 <= metrics["map"][3] <= 1
    )  # OML's precision@5 too


@pytest.mark.slow
def test_validation_with_two_loaders(oml_cache: Path, capsys: pytest.CaptureFixture) -> None:
    """docs/readme/examples_source/extractor/train_2loaders_val.md (random ViT-S; the first loader's images at the
    mock's 64 x 64 where OML resizes to 224, the second's at OML's 48). Slow: ``log_images=True`` draws the worst
    queries of every metric for both loaders (~18 s of matplotlib here)."""
    # --- OML's example, `oml` -> `oml_core`; random weights, 64 for 224 ---
    import pytorch_lightning as pl
    from oml_core.models import ViTExtractor
    from oml_core.transforms.images.torchvision import get_normalisation_resize_torch
    from torch.utils.data import DataLoader

    from oml_core.datasets import ImageQueryGalleryLabeledDataset
    from oml_core.lightning.callbacks.metric import MetricValCallback
    from oml_core.lightning.modules.extractor import ExtractorModule
    from oml_core.metrics import EmbeddingMetrics
    from oml_core.utils import get_mock_images_dataset

    _, df_val = get_mock_images_dataset(global_paths=True)

    extractor = ViTExtractor(weights=None, arch="vits16", normalise_features=False)

    # 1st validation dataset (big images)
    val_dataset_1 = ImageQueryGalleryLabeledDataset(
        df_val, transform=get_normalisation_resize_torch(im_size=64)
    )
    val_loader_1 = DataLoader(val_dataset_1, batch_size=4)
    metric_callback_1 = MetricValCallback(
        metric=EmbeddingMetrics(dataset=val_dataset_1), log_images=True, loader_idx=0
    )

    # 2nd validation dataset (small images)
    val_dataset_2 = ImageQueryGalleryLabeledDataset(
        df_val, transform=get_normalisation_resize_torch(im_size=48)
    )
    val_loader_2 = DataLoader(val_dataset_2, batch_size=4)
    metric_callback_2 = MetricValCallback(
        metric=EmbeddingMetrics(dataset=val_dataset_2), log_images=True, loader_idx=1
    )

    # run validation
    pl_model = ExtractorModule(extractor, None, None)
    trainer = pl.Trainer(
        max_epochs=3, callbacks=[metric_callback_1, metric_callback_2], num_sanity_val_steps=0
    )
    trainer.validate(pl_model, dataloaders=(val_loader_1, val_loader_2))

    print(metric_callback_1.metric.retrieval_results)
    print(metric_callback_2.metric.retrieval_results)
    # --- what it did ---
    from oml_core.retrieval import RetrievalResults

    extractor.eval()
    for dataset, callback in ((val_dataset_1, metric_callback_1), (val_dataset_2, metric_callback_2)):
        rr = callback.metric.retrieval_results
        assert isinstance(rr, RetrievalResults) and rr.n_queries == 64
        with torch.no_grad():  # the same retrieval from the model's own embeddings of that loader's images
            embeddings = torch.cat([extractor(dataset[i]["input_tensors"][None]) for i in range(64)])
        expected = RetrievalResults.from_embeddings(embeddings, dataset, n_items=rr.retrieved_ids[0].numel())
        assert [ids.tolist() for ids in rr.retrieved_ids] == [ids.tolist() for ids in expected.retrieved_ids]


def test_handling_categories(oml_cache: Path, capsys: pytest.CaptureFixture) -> None:
    """docs/readme/examples_source/extractor/handling_categories.md (random ViT-S at 64 x 64). It reads the
    categories as OML 4.0 keeps them, ``val.extra_data["category"]``."""
    # --- OML's example, `oml` -> `oml_core`; random weights, the mock's image size ---
    from pprint import pprint

    from oml_core.losses import TripletLossWithMiner
    from oml_core.miners import AllTripletsMiner
    from oml_core.models import ViTExtractor
    from oml_core.samplers import DistinctCategoryBalanceSampler
    from oml_core.transforms.images.torchvision import get_normalisation_resize_torch
    from torch.optim import Adam
    from torch.utils.data import DataLoader

    from oml_core import datasets as d
    from oml_core.inference import inference
    from oml_core.metrics import calc_retrieval_metrics_rr
    from oml_core.retrieval import RetrievalResults
    from oml_core.utils import get_mock_images_dataset

    model = ViTExtractor(weights=None, arch="vits16", normalise_features=False).to("cpu")
    transforms = get_normalisation_resize_torch(im_size=64)

    df_train, df_val = get_mock_images_dataset(df_name="df_with_category.csv", global_paths=True)
    train = d.ImageLabeledDataset(df_train, transform=transforms)
    val = d.ImageQueryGalleryLabeledDataset(df_val, transform=transforms)

    optimizer = Adam(model.parameters(), lr=1e-4)
    criterion = TripletLossWithMiner(0.1, AllTripletsMiner(), need_logs=True)

    # >>>>> You can use one of category aware samplers
    args = {
        "n_categories": 2,
        "n_labels": 2,
        "n_instances": 2,
        "label2category": train.get_label2category(),
        "labels": train.get_labels(),
    }
    sampler = DistinctCategoryBalanceSampler(epoch_size=5, **args)

    batches = []

    def training():
        for batch in DataLoader(train, batch_sampler=sampler):
            embeddings = model(batch["input_tensors"])
            loss = criterion(embeddings, batch["labels"])
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            pprint(criterion.last_logs)
            batches.append(batch)

    def validation():
        embeddings = inference(model, val, batch_size=4, num_workers=0)
        rr = RetrievalResults.from_embeddings(embeddings, val, n_items=3)
        rr.visualize(query_ids=[2, 1], dataset=val, show=True)

        # >>>> When query categories are known we may get fine-grained metrics
        query_categories = np.array(val.extra_data["category"])[val.get_query_ids()]
        metrics = calc_retrieval_metrics_rr(
            rr, query_categories=query_categories, map_top_k=(3,), cmc_top_k=(1,)
        )
        pprint(metrics)
        return rr, query_categories, metrics

    training()
    rr, query_categories, metrics = validation()
    # --- what it did ---
    assert len(batches) == 5  # epoch_size
    for batch in batches:  # 2 categories, 2 labels of each, 2 images of each label
        categories = [train.get_label2category()[int(label)] for label in batch["labels"]]
        assert (
            len(batch["labels"]) == 8
            and len(set(categories)) == 2
            and len(set(batch["labels"].tolist())) == 4
        )
        assert batch["category"] == categories  # the items carry OML's key
    assert query_categories.tolist() == df_val["category"].tolist()  # every validation row is a query
    assert set(metrics) == {"OVERALL", *df_val["category"]}
    labels = df_val["label"].tolist()
    for category in set(df_val["category"]):  # each category's cmc@1 over its own queries
        rows = [q for q in range(64) if query_categories[q] == category]
        hits = [labels[rr.retrieved_ids[q][0]] == labels[q] for q in rows]
        assert metrics[category]["cmc"][1] == pytest.approx(np.mean(hits))


def test_validation_with_sequences(oml_cache: Path, capsys: pytest.CaptureFixture) -> None:
    """docs/readme/examples_source/extractor/val_with_sequence.md (random ViT-S where OML downloads)."""
    # --- OML's example, `oml` -> `oml_core`; random weights ---
    from oml_core.models import ViTExtractor

    from oml_core.datasets import ImageQueryGalleryLabeledDataset
    from oml_core.inference import inference
    from oml_core.metrics import calc_retrieval_metrics_rr
    from oml_core.retrieval import RetrievalResults
    from oml_core.utils import get_mock_images_dataset

    extractor = ViTExtractor(weights=None, arch="vits16", normalise_features=False).to("cpu")

    # <- sequence info is in the file
    _, df_val = get_mock_images_dataset(global_paths=True, df_name="df_with_sequence.csv")
    dataset = ImageQueryGalleryLabeledDataset(df_val)
    embeddings = inference(extractor, dataset, batch_size=4, num_workers=0)

    rr = RetrievalResults.from_embeddings(embeddings, dataset, n_items=5)
    rr.visualize(query_ids=[2, 1], dataset=dataset, show=True)

    metrics = calc_retrieval_metrics_rr(rr, map_top_k=(3, 5), precision_top_k=(5,), cmc_top_k=(3,))
    print(rr, "\n", metrics)
    # --- what it did ---
    sequences = df_val["sequence"].tolist()
    for q in range(64):  # a query retrieves nothing of its own sequence (the same object seen again)
        others = [j for j in range(64) if sequences[j] != sequences[q]]
        assert rr.retrieved_ids[q].tolist() == naive_top(embeddings, q, 5, others)
    assert set(metrics) == {"cmc", "precision", "map"}


def test_thresholding_postprocessors(oml_cache: Path, capsys: pytest.CaptureFixture) -> None:
    """docs/readme/examples_source/postprocessing/algo.md (random ViT-S where OML downloads; the example builds
    its dataset without the transforms it gets, so the images keep their 64 x 64)."""
    # --- OML's example, `oml` -> `oml_core`; random weights ---
    from oml_core.models import ViTExtractor

    from oml_core.datasets import ImageQueryGalleryLabeledDataset
    from oml_core.inference import inference
    from oml_core.metrics import calc_retrieval_metrics_rr
    from oml_core.registry import get_transforms_for_pretrained
    from oml_core.retrieval import AdaptiveThresholding, ConstantThresholding, RetrievalResults
    from oml_core.utils import get_mock_images_dataset

    _, df_test = get_mock_images_dataset(global_paths=True)

    extractor = ViTExtractor(weights=None, arch="vits16", normalise_features=False)
    transforms, _ = get_transforms_for_pretrained("vits16_dino")

    dataset = ImageQueryGalleryLabeledDataset(df_test)

    embeddings = inference(extractor, dataset, batch_size=4, num_workers=0)

    steps = []
    rr = RetrievalResults.from_embeddings(embeddings, dataset, n_items=5)
    print(rr, calc_retrieval_metrics_rr(rr), "\n")
    steps.append(rr)

    rr = ConstantThresholding(th=75).process(rr)
    print(rr, calc_retrieval_metrics_rr(rr), "\n")
    steps.append(rr)

    rr = AdaptiveThresholding(n_std=1.5).process(rr)
    print(rr, calc_retrieval_metrics_rr(rr), "\n")
    steps.append(rr)
    # --- what it did ---
    first, constant, adaptive = steps
    for q in range(64):
        ids, distances = first.retrieved_ids[q].tolist(), first.distances[q].tolist()
        assert constant.retrieved_ids[q].tolist() == [j for j, dist in zip(ids, distances) if dist < 75]
        kept = adaptive.retrieved_ids[q].tolist()
        assert kept == constant.retrieved_ids[q].tolist()[: len(kept)]
    assert len(capsys.readouterr().out.strip().splitlines()) >= 3


def test_zoo_images(oml_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/readme/examples_source/zoo/zoo_images.md on random ViT-S weights saved in the weights cache under the
    zoo's file name (``from_pretrained`` finds them, no download) and under OML's ``vits16_dino.ckpt``; it opens the
    mock's ``images/circle_1.jpg``, OML's file name, after the mock dataset is made in its default root."""
    from oml_core.utils import get_mock_images_dataset
    from tests.test_manual_examples import _save_random_vits16_dino

    monkeypatch.setenv("OML_WEIGHTS_DIR", str(tmp_path / "weights"))
    monkeypatch.setenv("OML_SKIP_WEIGHTS_CHECK", "1")  # random weights under the real zoo name
    monkeypatch.setenv("OML_OFFLINE", "1")  # a missing file fails at once instead of being downloaded
    zoo_file = _save_random_vits16_dino()
    shutil.copy(zoo_file, zoo_file.parent / "vits16_dino.ckpt")
    get_mock_images_dataset()
    # --- OML's example, `oml` -> `oml_core` ---
    from oml_core.models import ViTExtractor

    from oml_core.const import CKPT_SAVE_ROOT as CKPT_DIR
    from oml_core.const import MOCK_DATASET_PATH as DATA_DIR
    from oml_core.registry import get_transforms_for_pretrained

    model = ViTExtractor.from_pretrained("vits16_dino").eval()
    transforms, im_reader = get_transforms_for_pretrained("vits16_dino")

    img = im_reader(DATA_DIR / "images" / "circle_1.jpg")  # put path to your image here
    img_tensor = transforms(img)
    # img_tensor = transforms(image=img)["image"]  # for transforms from Albumentations

    features = model(img_tensor.unsqueeze(0))

    # Check other available models:
    print(list(ViTExtractor.pretrained_models.keys()))

    # Load checkpoint saved on a disk:
    model_ = ViTExtractor(weights=CKPT_DIR / "vits16_dino.ckpt", arch="vits16", normalise_features=False)
    # --- what it did ---
    assert img_tensor.shape == (3, 224, 224) and features.shape == (1, 384)
    with torch.no_grad():
        assert torch.allclose(model_.eval()(img_tensor.unsqueeze(0)), features, atol=1e-5)
    assert "vits16_dino" in ViTExtractor.pretrained_models


def test_the_retrieval_format_of_every_mock_dataset(oml_cache: Path, capsys: pytest.CaptureFixture) -> None:
    """docs/readme/examples_source/retrieval_format.md: the three mock datasets pass the format's check (the
    audio's are the oml-audio plugin's, the texts' the oml-texts plugin's)."""
    # --- OML's example, `oml` -> `oml_core` ---
    from oml_core.utils.dataframe_format import check_retrieval_dataframe_format

    from oml_core.utils import (
        get_mock_audios_dataset,
        get_mock_images_dataset,
        get_mock_texts_dataset,
    )

    # IMAGES
    df_train, df_val = get_mock_images_dataset(global_paths=True)
    check_retrieval_dataframe_format(df=df_train)
    check_retrieval_dataframe_format(df=df_val)

    # TEXTS
    df_train, df_val = get_mock_texts_dataset()
    check_retrieval_dataframe_format(df=df_train)
    check_retrieval_dataframe_format(df=df_val)

    # AUDIO
    df_train, df_val = get_mock_audios_dataset(global_paths=True)
    check_retrieval_dataframe_format(df=df_train)
    check_retrieval_dataframe_format(df=df_val)
    # --- what it did ---
    out = capsys.readouterr().out
    assert out.count("OK, in OML's retrieval format") == 6
    from oml_core.const import MOCK_AUDIO_DATASET_PATH

    assert Path(df_train["path"][0]) == MOCK_AUDIO_DATASET_PATH / "voices" / "voice0_0.wav"  # OML's file name
