"""``oml export`` of ECAPA-TDNN (a small random one of its class) on waveforms: the features (pre-emphasis, the STFT,
the mel filterbank) inside the graph, any batch size and any number of samples."""

from __future__ import annotations

import torch
from oml_audio.ecapa import FEATURES, ECAPATDNNExtractor

from oml_core.export import ExportSource, write_export
from oml_core.export.extractor import OnnxExtractor
from oml_core.registry import Registry


def test_ecapa_exports_with_its_features_and_parity_at_other_sizes(tmp_path):
    torch.manual_seed(0)
    sizes = {"channels": 16, "mfa_channels": 24, "attention_channels": 8, "embedding_dim": 12}
    model = ECAPATDNNExtractor(None, "ecapa_tdnn_taoruijie", normalise_features=True, **sizes).eval()
    spec = {"name": "ecapa_tdnn", "args": {"arch": "ecapa_tdnn_taoruijie", **sizes}}
    dataset = {"name": "audios", "args": {"sample_rate": 16000, "max_num_seconds": 0.5}}
    source = ExportSource("checkpoint", "ecapa.ckpt", model, spec, None, dataset, None)
    write_export(source, tmp_path / "ecapa", Registry())
    onnx = OnnxExtractor(tmp_path / "ecapa")
    data = onnx.manifest.data
    assert data["inputs"] == [{"name": "waveforms", "dtype": "float32", "shape": ["batch", 1, "samples"]}]
    pre = onnx.manifest.preprocessing
    assert (pre["sample_rate"], pre["max_num_seconds"], pre["features"]) == (16000, 0.5, FEATURES)
    assert data["parity"]["max_relative_l2"] <= 1e-4 and onnx.feat_dim == 12
    waveforms = 0.1 * torch.randn(4, 1, 8000, generator=torch.Generator().manual_seed(1))  # half a second
    with torch.no_grad():
        expected = model(waveforms)
    found = onnx(waveforms)
    assert float(torch.linalg.vector_norm(found - expected) / torch.linalg.vector_norm(expected)) < 1e-4
