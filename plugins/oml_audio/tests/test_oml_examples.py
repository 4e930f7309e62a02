"""OML 4.0's audio examples (its docs' ``train_val_all_modalities.md``, audio column, and ``zoo_audios.md``) as
they run with oml: OML's code with ``oml`` -> ``oml_core`` in its imports and the audio names from ``oml_audio``.
One change besides the imports: the ECAPA-TDNN has random weights (``weights=None``) where OML downloads
``ecapa_tdnn_taoruijie``: nothing is downloaded in a test. In the zoo example, torchaudio's ``load`` and
``resample`` (torchaudio's wheels pin other torch versions) are soundfile and oml-audio's polyphase resampling."""

from __future__ import annotations

import math

import pytest
import torch


@pytest.mark.slow
def test_the_train_and_validate_example_on_audio(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OML_CACHE_DIR", str(tmp_path))
    torch.manual_seed(0)
    # --- OML's example, `oml` -> `oml_core`, the audio names from oml_audio, random weights ---
    from oml_audio import (
        AudioLabeledDataset,
        AudioQueryGalleryLabeledDataset,
        ECAPATDNNExtractor,
        get_mock_audios_dataset,
    )
    from oml_core.losses import ArcFaceLoss
    from oml_core.samplers import BalanceSampler
    from torch.optim import Adam
    from torch.utils.data import DataLoader

    from oml_core.inference import inference
    from oml_core.metrics import calc_retrieval_metrics_rr
    from oml_core.retrieval import AdaptiveThresholding, RetrievalResults

    model = ECAPATDNNExtractor(weights=None, arch="ecapa_tdnn_taoruijie").to("cpu").train()

    df_train, df_val = get_mock_audios_dataset(global_paths=True)
    train = AudioLabeledDataset(df_train)
    val = AudioQueryGalleryLabeledDataset(df_val)

    optimizer = Adam(model.parameters(), lr=1e-4)
    criterion = ArcFaceLoss(m=0.2, s=30, in_features=192, num_classes=4)  # similar to paper
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
    html = rr.visualize_as_html(query_ids=[2, 1], dataset=val, show=True)
    metrics = calc_retrieval_metrics_rr(rr, map_top_k=(3,), cmc_top_k=(1,))
    print(metrics)
    # --- what it did ---
    assert (
        len(logs) == len(sampler) == df_train["label"].nunique() // 2
    )  # each label once an epoch, 2 a batch
    for log in logs:
        assert set(log) == {"accuracy"} and 0 <= log["accuracy"] <= 1
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert html.count('data-kind="query"') == 2
    blocks = sum(html.count(f'data-kind="{kind}"') for kind in ("query", "retrieved", "gt"))
    assert html.count("<audio controls") == blocks  # every item with its player
    assert set(metrics) == {"cmc", "precision", "map"} and list(metrics["cmc"]) == [1]
    assert 0 <= float(metrics["cmc"][1]) <= 1 and math.isfinite(float(metrics["map"][3]))
    out = capsys.readouterr().out
    assert "IPython.core.display.HTML object" in out and "{'cmc': {1: " in out


def test_the_zoo_example_on_audio(tmp_path, monkeypatch):
    monkeypatch.setenv("OML_CACHE_DIR", str(tmp_path))
    import soundfile
    from oml_audio import ECAPATDNNExtractor, get_mock_audios_dataset
    from oml_audio.waveform import resample

    df_train, _ = get_mock_audios_dataset(global_paths=True)
    file_path = df_train["path"][0]

    model = (
        ECAPATDNNExtractor(weights=None, arch="ecapa_tdnn_taoruijie", normalise_features=False)
        .to("cpu")
        .eval()
    )
    samples, sr = soundfile.read(file_path, dtype="float32", always_2d=True)
    audio = torch.from_numpy(samples.T)

    if audio.shape[0] > 1:
        audio = audio.mean(dim=0, keepdim=True)  # mean by channels
    if sr != 16000:
        audio = resample(audio, sr, 16000)

    embeddings = model.extract(audio)
    assert embeddings.shape == (1, 192)
    with torch.no_grad():
        assert torch.equal(embeddings, model(audio))
