"""The mel filterbank features against a naive computation (a DFT as a sum, triangular filters from their
definition), and ECAPA-TDNN: the released model's state-dict layout, loading it from a file and from the zoo
(offline), the embeddings' shape and normalisation.

The released checkpoint itself (``ecapa_tdnn_taoruijie.pth``, 5994 training speakers) cannot be downloaded here:
its layout is checked against a file written in the same form (``speaker_encoder.*`` + ``speaker_loss.weight``)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from oml_audio import ECAPATDNNExtractor
from oml_audio.ecapa import release_to_network
from oml_audio.features import MelSpectrogram, PreEmphasis

from oml_core.registry import Registry
from oml_core.zoo import get_pretrained, get_transforms_for_pretrained


def naive_mel(
    x: np.ndarray, rate: int, n_fft: int, win: int, hop: int, f_min: float, f_max: float, n_mels: int
):
    """Centred frames (reflected ends), a periodic Hamming window in the middle of each frame, the power of a DFT
    written as a sum, and HTK triangular filters built one by one: ``[n_mels, frames]``."""
    padded = np.pad(x, n_fft // 2, mode="reflect")
    window = np.zeros(n_fft)
    start = (n_fft - win) // 2
    window[start : start + win] = [0.54 - 0.46 * math.cos(2 * math.pi * n / win) for n in range(win)]
    n = np.arange(n_fft)
    dft = np.array([np.exp(-2j * math.pi * k * n / n_fft) for k in range(n_fft // 2 + 1)])
    frames = [padded[f * hop : f * hop + n_fft] * window for f in range(1 + len(x) // hop)]
    power = np.abs(np.array([dft @ frame for frame in frames])) ** 2  # [frames, freqs]

    def mel(hz: float) -> float:
        return 2595 * math.log10(1 + hz / 700)

    def hz(m: float) -> float:
        return 700 * (10 ** (m / 2595) - 1)

    edges = [hz(mel(f_min) + i * (mel(f_max) - mel(f_min)) / (n_mels + 1)) for i in range(n_mels + 2)]
    filters = np.zeros((n_fft // 2 + 1, n_mels))
    for m in range(n_mels):
        lo, centre, hi = edges[m : m + 3]
        for k in range(n_fft // 2 + 1):
            f = k * (rate / 2) / (n_fft // 2)
            filters[k, m] = max(0.0, min((f - lo) / (centre - lo), (hi - f) / (hi - centre)))
    return (power @ filters).T


def test_the_mel_spectrogram_is_the_naive_one_on_a_tone() -> None:
    t = np.arange(1600) / 16_000
    tone = 0.5 * np.sin(2 * np.pi * 1000 * t) + 0.2 * np.sin(2 * np.pi * 3100 * t + 1.0)
    ours = MelSpectrogram()(torch.tensor(tone, dtype=torch.float32)[None])[0].double().numpy()
    expected = naive_mel(tone, 16_000, 512, 400, 160, 20.0, 7600.0, 80)
    assert ours.shape == expected.shape == (80, 11)
    np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=1e-6 * expected.max())
    # the energy sits in the filters around 1 kHz and 3.1 kHz
    assert set(np.argsort(ours.sum(axis=1))[-2:]) <= set(range(15, 50))


def test_pre_emphasis_subtracts_097_of_the_previous_sample_reflecting_the_first() -> None:
    x = torch.tensor([[1.0, 2.0, 4.0, 8.0]])
    expected = torch.tensor([[1.0 - 0.97 * 2.0, 2.0 - 0.97 * 1.0, 4.0 - 0.97 * 2.0, 8.0 - 0.97 * 4.0]])
    torch.testing.assert_close(PreEmphasis()(x), expected)


def released_layout(channels: int = 1024, scale: int = 8) -> dict[str, tuple[int, ...]]:
    """The keys and shapes of Tao Ruijie's ECAPA_TDNN(C=1024) state dict, written out from its definition:
    80 mels, 3 SE-Res2Net blocks of width C/8, layer4 to 1536, attention 4608 -> 256 -> 1536, fc6 3072 -> 192."""
    width = channels // scale
    layout: dict[str, tuple[int, ...]] = {
        "torchfbank.0.flipped_filter": (1, 1, 2),
        "torchfbank.1.spectrogram.window": (400,),
        "torchfbank.1.mel_scale.fb": (257, 80),
        "conv1.weight": (channels, 80, 5),
        "conv1.bias": (channels,),
    }

    def bn(prefix: str, n: int) -> None:
        layout.update({f"{prefix}.{p}": (n,) for p in ("weight", "bias", "running_mean", "running_var")})
        layout[f"{prefix}.num_batches_tracked"] = ()

    bn("bn1", channels)
    for layer in ("layer1", "layer2", "layer3"):
        layout[f"{layer}.conv1.weight"], layout[f"{layer}.conv1.bias"] = (channels, channels, 1), (channels,)
        bn(f"{layer}.bn1", channels)
        for i in range(scale - 1):
            layout[f"{layer}.convs.{i}.weight"], layout[f"{layer}.convs.{i}.bias"] = (
                (width, width, 3),
                (width,),
            )
        for i in range(scale - 1):
            bn(f"{layer}.bns.{i}", width)
        layout[f"{layer}.conv3.weight"], layout[f"{layer}.conv3.bias"] = (channels, channels, 1), (channels,)
        bn(f"{layer}.bn3", channels)
        layout[f"{layer}.se.se.1.weight"], layout[f"{layer}.se.se.1.bias"] = (128, channels, 1), (128,)
        layout[f"{layer}.se.se.3.weight"], layout[f"{layer}.se.se.3.bias"] = (channels, 128, 1), (channels,)
    layout["layer4.weight"], layout["layer4.bias"] = (1536, 3 * channels, 1), (1536,)
    layout["attention.0.weight"], layout["attention.0.bias"] = (256, 4608, 1), (256,)
    bn("attention.2", 256)
    layout["attention.4.weight"], layout["attention.4.bias"] = (1536, 256, 1), (1536,)
    bn("bn5", 3072)
    layout["fc6.weight"], layout["fc6.bias"] = (192, 3072), (192,)
    bn("bn6", 192)
    return layout


@pytest.fixture(scope="module")
def released() -> ECAPATDNNExtractor:
    torch.manual_seed(0)
    return ECAPATDNNExtractor(weights=None, arch="ecapa_tdnn_taoruijie").eval()


def test_the_network_has_the_released_models_keys_and_shapes(released: ECAPATDNNExtractor) -> None:
    ours = {key: tuple(value.shape) for key, value in released.model.state_dict().items()}
    assert ours == released_layout()
    assert released.feat_dim == 192
    # the same constants as the release's buffers: torchaudio's periodic Hamming window, HTK filters, 0.97
    torch.testing.assert_close(released.model.torchfbank[1].spectrogram.window, torch.hamming_window(400))
    torch.testing.assert_close(released.model.torchfbank[0].flipped_filter, torch.tensor([[[-0.97, 1.0]]]))


def release_file(path: Path, extractor: ECAPATDNNExtractor) -> Path:
    """A file in the release's form: the network under ``speaker_encoder.`` and the AAM-softmax weight of the 5994
    training speakers under ``speaker_loss.weight``."""
    state = {f"speaker_encoder.{k}": v.clone() for k, v in extractor.model.state_dict().items()}
    state["speaker_loss.weight"] = torch.randn(5994, 192)
    torch.save(state, path)
    return path


def test_a_release_file_loads_from_a_path_and_from_the_zoo_offline(
    released: ECAPATDNNExtractor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = release_file(tmp_path / "pretrain.model.pth", released)
    waveform = torch.randn(2, 1, 8000, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = released(waveform)
    from_path = ECAPATDNNExtractor(weights=str(path), arch="ecapa_tdnn_taoruijie").eval()
    with torch.no_grad():
        torch.testing.assert_close(from_path(waveform), expected)

    entry = get_pretrained("ecapa_tdnn_taoruijie", Registry())
    assert (entry.extractor, entry.md5, entry.filename) == (
        "ecapa_tdnn",
        "2bbc0ea09a41217eaff16b676ecb63d7",
        "ecapa_tdnn_taoruijie.pth",
    )
    assert entry.url == "https://github.com/TaoRuijie/ECAPA-TDNN/raw/refs/heads/main/exps/pretrain.model"
    with pytest.raises(ValueError, match="'ecapa_tdnn_taoruijie' takes no image transforms"):
        get_transforms_for_pretrained("ecapa_tdnn_taoruijie", Registry())

    weights = tmp_path / "weights"
    weights.mkdir()
    path.rename(
        weights / entry.filename
    )  # the file put into the cache by hand: not OML's, so its md5 differs
    monkeypatch.setenv("OML_WEIGHTS_DIR", str(weights))
    monkeypatch.setenv("OML_OFFLINE", "1")
    monkeypatch.setenv("OML_SKIP_WEIGHTS_CHECK", "1")
    from_zoo = ECAPATDNNExtractor.from_pretrained("ecapa_tdnn_taoruijie").eval()
    assert isinstance(from_zoo, ECAPATDNNExtractor) and not from_zoo.normalise_features
    with torch.no_grad():
        torch.testing.assert_close(from_zoo(waveform), expected)
    assert "speaker_loss.weight" not in release_to_network(
        torch.load(weights / entry.filename, weights_only=True)
    )


def test_a_small_model_embeds_waveforms_normalised_and_refuses_stereo() -> None:
    torch.manual_seed(0)
    small = ECAPATDNNExtractor(
        None,
        "ecapa_tdnn_taoruijie",
        True,
        channels=32,
        mfa_channels=48,
        attention_channels=16,
        embedding_dim=24,
    ).eval()
    with torch.no_grad():
        flat, channel = small(torch.randn(3, 4000)), small(torch.randn(3, 1, 4000))
    assert flat.shape == channel.shape == (3, 24) and small.feat_dim == 24
    torch.testing.assert_close(flat.norm(dim=1), torch.ones(3))
    with pytest.raises(
        ValueError, match=r"takes waveforms \[batch, samples\] or \[batch, 1, samples\], got \[3, 2, 4000\]"
    ):
        small(torch.randn(3, 2, 4000))
    with pytest.raises(ValueError, match="Unknown arch 'ecapa_big'"):
        ECAPATDNNExtractor(None, "ecapa_big")
