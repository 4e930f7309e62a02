"""OML 4.0's text examples (its docs' ``train_val_all_modalities.md``, texts column, and ``zoo_texts.md``) as
they run with oml: OML's code with ``oml`` -> ``oml_core`` in its imports and the text names from ``oml_texts``.
One change besides the imports: the model is the genuine all-MiniLM-L6-v2 read from its local folder (384
features) where OML downloads ``bert-base-uncased`` (768): nothing is downloaded in a test."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch


def naive_cmc_at_1(rr, labels: list[int], query_rows: list[int], gallery_rows: list[int]) -> float:
    """The share of queries whose first retrieved gallery item (if any) has the query's label."""
    hits = []
    for q, retrieved in enumerate(rr.retrieved_ids):
        first = retrieved.tolist()[:1]
        hits.append(bool(first) and labels[gallery_rows[first[0]]] == labels[query_rows[q]])
    return sum(hits) / len(hits)


@pytest.mark.slow
def test_the_train_and_validate_example_on_texts(minilm_folder: Path, capsys):
    torch.manual_seed(0)
    # --- OML's example, `oml` -> `oml_core`, the text names from oml_texts, MiniLM for bert-base-uncased ---
    from oml_core.losses import TripletLossWithMiner
    from oml_core.miners import NHardTripletsMiner
    from oml_core.samplers import BalanceSampler
    from oml_texts import (
        HFWrapper,
        TextLabeledDataset,
        TextQueryGalleryLabeledDataset,
        get_mock_texts_dataset,
    )
    from torch.optim import Adam
    from torch.utils.data import DataLoader
    from transformers import AutoModel, AutoTokenizer

    from oml_core.inference import inference
    from oml_core.metrics import calc_retrieval_metrics_rr
    from oml_core.retrieval import AdaptiveThresholding, RetrievalResults

    model = HFWrapper(AutoModel.from_pretrained(minilm_folder), 384).to("cpu").train()
    tokenizer = AutoTokenizer.from_pretrained(minilm_folder)

    df_train, df_val = get_mock_texts_dataset()
    train = TextLabeledDataset(df_train, tokenizer=tokenizer)
    val = TextQueryGalleryLabeledDataset(df_val, tokenizer=tokenizer)

    optimizer = Adam(model.parameters(), lr=1e-4)
    criterion = TripletLossWithMiner(0.1, NHardTripletsMiner(n_positive=2, n_negative=2), need_logs=True)
    sampler = BalanceSampler(train.get_labels(), n_labels=2, n_instances=2)

    before = [p.detach().clone() for p in model.parameters()]
    logs = []
    for batch in DataLoader(train, batch_sampler=sampler):
        embeddings = model(batch["input_tensors"])
        loss = criterion(embeddings, batch["labels"])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        print(criterion.last_logs)
        logs.append(dict(criterion.last_logs))

    embeddings = inference(model, val, batch_size=4, num_workers=0)
    rr = RetrievalResults.from_embeddings(embeddings, val, n_items=3)
    rr = AdaptiveThresholding(n_std=2).process(rr)
    rr.visualize(query_ids=[2, 1], dataset=val, show=True)
    metrics = calc_retrieval_metrics_rr(rr, map_top_k=(3,), cmc_top_k=(1,))
    print(metrics)
    # --- what it did ---
    assert (
        len(logs) == len(sampler) == df_train["label"].nunique() // 2
    )  # each label once an epoch, 2 a batch
    for log in logs:
        assert set(log) == {"active_tri", "pos_dist", "neg_dist"}
        assert (
            0 <= log["active_tri"] <= 1 and math.isfinite(log["pos_dist"]) and math.isfinite(log["neg_dist"])
        )
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert (
        set(metrics) == {"cmc", "precision", "map"}
        and list(metrics["cmc"]) == [1]
        and list(metrics["map"]) == [3]
    )
    query_rows = df_val.index[df_val["is_query"]].tolist()
    gallery_rows = df_val.index[df_val["is_gallery"]].tolist()
    labels = df_val["label"].tolist()
    assert float(metrics["cmc"][1]) == pytest.approx(naive_cmc_at_1(rr, labels, query_rows, gallery_rows))
    assert "{'cmc': {1: " in capsys.readouterr().out


def test_the_zoo_example_on_texts(minilm_folder: Path):
    from oml_texts import HFWrapper
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(minilm_folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(minilm_folder)
    extractor = HFWrapper(model=model, feat_dim=384)

    inp = tokenizer(text="Hello world", return_tensors="pt", add_special_tokens=True)
    embeddings = extractor(inp)
    # HFWrapper is the first token's ([CLS]) last hidden state
    assert embeddings.shape == (1, 384)
    assert torch.equal(embeddings, model(**inp)["last_hidden_state"][:, 0])
