"""ECAPA-TDNN (Desplanques et al., 2020) as in Tao Ruijie's speaker-verification model, OML's
``ecapa_tdnn_taoruijie``, and its extractor ``ECAPATDNNExtractor``.

The network, on a 16 kHz waveform ``[B, samples]``:

1. features, without gradient: pre-emphasis (0.97), the mel power spectrogram (512-point FFT, 25 ms Hamming
   window, 10 ms hop, 80 mels from 20 to 7600 Hz), ``log(mel + 1e-6)`` minus its mean over time;
2. ``conv1`` (kernel 5) + ReLU + BN to ``C`` channels, then three SE-Res2Net blocks (``layer1..3``, dilations 2, 3,
   4, 8 scales) on ``x``, ``x + x1``, ``x + x1 + x2``; ``layer4`` (1x1) + ReLU over their concatenation;
3. attentive statistics pooling: attention weights (softmax over time) from the features with their global mean
   and standard deviation, the weighted mean and standard deviation (``std = sqrt(max(E[x^2] - mu^2, 1e-4))``);
4. ``bn5``, ``fc6`` to the embedding, ``bn6``.

Modules and buffers are named as in that model (``torchfbank.0.flipped_filter``,
``torchfbank.1.spectrogram.window``, ``torchfbank.1.mel_scale.fb``, ``layer1.convs.0.weight``,
``attention.0.weight``, ``fc6.weight`` ...), so that its released state dict (without the ``speaker_encoder.``
prefix and the loss's ``speaker_loss.weight``) loads strictly.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from oml_audio.features import MelSpectrogram, PreEmphasis
from oml_core.const import DEFAULT_SAMPLE_RATE, MAX_AUDIO_LEN
from oml_core.interfaces.export import BATCH_AXIS, ExportContext, ExportSignature, IExportable
from oml_core.utils.checkpoints import WRAPPER_PREFIXES, load_state_dict_strict
from oml_core.zoo.extractor import ZooExtractor
from oml_core.zoo.weights import load_weights

#: The name of the input of an export's graph, and of its axis of samples.
WAVEFORMS_INPUT = "waveforms"
SAMPLES_AXIS = "samples"
#: The fewest samples an export takes (the features reflect 256 samples at each end), and the range of the
#: lengths of its example and probe waveforms (a quarter to half a second at 16 kHz: short, and varied).
MIN_EXPORT_SAMPLES = 512
EXAMPLE_SAMPLES = (4_000, 8_000)
#: The network's features, as an export's preprocessing describes them (they are inside its graph).
FEATURES = (
    "inside the graph: pre-emphasis 0.97, |STFT|^2 (512-point FFT, 400-sample Hamming window, hop 160), 80 HTK "
    "mels 20-7600 Hz, log(mel + 1e-6) minus its mean over time"
)

#: The prefix of the network's keys in the released file, and its loss's keys (dropped).
RELEASE_PREFIX = "speaker_encoder."
RELEASE_LOSS_PREFIX = "speaker_loss."


class SqueezeExcitation(nn.Module):
    """Channel gates: ``x * sigmoid(W2 relu(W1 mean_t(x)))`` (``se.1`` and ``se.3`` are the 1x1 convolutions)."""

    def __init__(self, channels: int, bottleneck: int = 128) -> None:
        super().__init__()
        self.se = nn.Sequential(
            nn.AdaptiveAvgPool1d(1),
            nn.Conv1d(channels, bottleneck, kernel_size=1),
            nn.ReLU(),
            nn.Conv1d(bottleneck, channels, kernel_size=1),
            nn.Sigmoid(),
        )

    def forward(self, x: Tensor) -> Tensor:
        """``[B, C, T]`` -> ``[B, C, T]``."""
        return x * self.se(x)


class SERes2Block(nn.Module):
    """A SE-Res2Net block: 1x1 conv, ``scale`` groups of ``channels // scale`` where group ``i > 0`` is convolved
    (dilated, kernel ``kernel_size``) after adding the previous group's output (the last group is passed
    through), 1x1 conv, squeeze-excitation, residual. Each conv is followed by ReLU then BN."""

    def __init__(self, channels: int, kernel_size: int, dilation: int, scale: int = 8) -> None:
        super().__init__()
        self.width = channels // scale
        self.conv1 = nn.Conv1d(channels, self.width * scale, kernel_size=1)
        self.bn1 = nn.BatchNorm1d(self.width * scale)
        padding = (kernel_size // 2) * dilation
        self.convs = nn.ModuleList(
            nn.Conv1d(self.width, self.width, kernel_size, dilation=dilation, padding=padding)
            for _ in range(scale - 1)
        )
        self.bns = nn.ModuleList(nn.BatchNorm1d(self.width) for _ in range(scale - 1))
        self.conv3 = nn.Conv1d(self.width * scale, channels, kernel_size=1)
        self.bn3 = nn.BatchNorm1d(channels)
        self.relu = nn.ReLU()
        self.se = SqueezeExcitation(channels)

    def forward(self, x: Tensor) -> Tensor:
        """``[B, C, T]`` -> ``[B, C, T]``."""
        groups = torch.split(self.bn1(self.relu(self.conv1(x))), self.width, dim=1)
        outputs: list[Tensor] = []
        for i, (conv, bn) in enumerate(zip(self.convs, self.bns)):
            group = groups[i] if i == 0 else outputs[-1] + groups[i]
            outputs.append(bn(self.relu(conv(group))))
        out = torch.cat([*outputs, groups[len(self.convs)]], dim=1)
        out = self.bn3(self.relu(self.conv3(out)))
        return self.se(out) + x


class ECAPATDNN(nn.Module):
    """The network (see the module's docstring); ``[B, samples]`` at 16 kHz -> ``[B, embedding_dim]``.

    Args:
        channels: ``C``, the width of the three SE-Res2Net blocks (1024 in the released model).
        mfa_channels: The width of ``layer4``, the multi-layer feature aggregation (1536).
        attention_channels: The hidden width of the attention (256).
        embedding_dim: The size of the embedding (192).
    """

    def __init__(
        self,
        channels: int = 1024,
        mfa_channels: int = 1536,
        attention_channels: int = 256,
        embedding_dim: int = 192,
    ) -> None:
        super().__init__()
        self.torchfbank = nn.Sequential(PreEmphasis(), MelSpectrogram())
        n_mels = self.torchfbank[1].mel_scale.fb.shape[1]
        self.conv1 = nn.Conv1d(n_mels, channels, kernel_size=5, padding=2)
        self.relu = nn.ReLU()
        self.bn1 = nn.BatchNorm1d(channels)
        self.layer1 = SERes2Block(channels, kernel_size=3, dilation=2)
        self.layer2 = SERes2Block(channels, kernel_size=3, dilation=3)
        self.layer3 = SERes2Block(channels, kernel_size=3, dilation=4)
        self.layer4 = nn.Conv1d(3 * channels, mfa_channels, kernel_size=1)
        self.attention = nn.Sequential(
            nn.Conv1d(3 * mfa_channels, attention_channels, kernel_size=1),
            nn.ReLU(),
            nn.BatchNorm1d(attention_channels),
            nn.Tanh(),
            nn.Conv1d(attention_channels, mfa_channels, kernel_size=1),
            nn.Softmax(dim=2),
        )
        self.bn5 = nn.BatchNorm1d(2 * mfa_channels)
        self.fc6 = nn.Linear(2 * mfa_channels, embedding_dim)
        self.bn6 = nn.BatchNorm1d(embedding_dim)

    def features(self, waveform: Tensor) -> Tensor:
        """The log mel filterbank ``[B, n_mels, frames]``, mean-normalised over time (no gradient)."""
        with torch.no_grad():
            x = torch.log(self.torchfbank(waveform) + 1e-6)
            return x - x.mean(dim=-1, keepdim=True)

    def forward(self, waveform: Tensor) -> Tensor:
        """``[B, samples]`` -> ``[B, embedding_dim]``."""
        x = self.bn1(self.relu(self.conv1(self.features(waveform))))
        x1 = self.layer1(x)
        x2 = self.layer2(x + x1)
        x3 = self.layer3(x + x1 + x2)
        x = self.relu(self.layer4(torch.cat((x1, x2, x3), dim=1)))

        frames = x.shape[-1]
        mean = x.mean(dim=2, keepdim=True)
        std = torch.sqrt(x.var(dim=2, keepdim=True).clamp(min=1e-4))
        context = torch.cat((x, mean.expand(-1, -1, frames), std.expand(-1, -1, frames)), dim=1)
        weights = self.attention(context)
        mu = (x * weights).sum(dim=2)
        sigma = torch.sqrt(((x**2) * weights).sum(dim=2).sub(mu**2).clamp(min=1e-4))
        return self.bn6(self.fc6(self.bn5(torch.cat((mu, sigma), dim=1))))


def release_to_network(state_dict: dict[str, Tensor]) -> dict[str, Tensor]:
    """The released training state (``speaker_encoder.*`` and the loss's ``speaker_loss.*``) as the network's
    state dict: the loss dropped, the prefix removed. The zoo's converter of ``ecapa_tdnn_taoruijie``."""
    return {
        key.removeprefix(RELEASE_PREFIX): value
        for key, value in state_dict.items()
        if not key.startswith(RELEASE_LOSS_PREFIX)
    }


class ECAPATDNNExtractor(ZooExtractor, IExportable):
    """OML's ``ECAPATDNNExtractor``: ECAPA-TDNN embeddings of 16 kHz mono waveforms ``[B, samples]`` or
    ``[B, 1, samples]`` (what the audio datasets give with ``convert_to_mono``), L2-normalised if asked.

    Args:
        weights: ``None`` for a random initialisation; a checkpoint file (``oml train``'s, a state dict of the
            network, or the released file with its ``speaker_encoder.`` prefix and loss); or a zoo key
            (``ecapa_tdnn_taoruijie``: offline, from the weights cache, downloaded only when missing).
        arch: ``ecapa_tdnn_taoruijie`` (``C = 1024``), the only architecture.
        normalise_features: L2-normalise the embeddings.
        channels: Overrides the architecture's ``C`` (a small random model; checkpoints of ``arch`` no longer fit).
        mfa_channels: Overrides its ``layer4`` width (1536).
        attention_channels: Overrides its attention width (256).
        embedding_dim: Overrides its embedding size (192).

    Raises:
        ValueError: an unknown ``arch``.
        UnknownNameError, FileNotFoundError, CheckpointError: ``weights`` that cannot be found or do not fit.
    """

    #: The architectures: ``{arch: ECAPATDNN arguments}``.
    constructors: dict[str, dict[str, int]] = {
        "ecapa_tdnn_taoruijie": {
            "channels": 1024,
            "mfa_channels": 1536,
            "attention_channels": 256,
            "embedding_dim": 192,
        }
    }

    def __init__(
        self,
        weights: str | Path | None,
        arch: str,
        normalise_features: bool = False,
        channels: int | None = None,
        mfa_channels: int | None = None,
        attention_channels: int | None = None,
        embedding_dim: int | None = None,
    ) -> None:
        if arch not in self.constructors:
            raise ValueError(
                f"Unknown arch {arch!r} of ECAPATDNNExtractor; known archs: {', '.join(self.constructors)}"
            )
        super().__init__()
        overrides = {
            "channels": channels,
            "mfa_channels": mfa_channels,
            "attention_channels": attention_channels,
            "embedding_dim": embedding_dim,
        }
        sizes = {**self.constructors[arch], **{k: v for k, v in overrides.items() if v is not None}}
        bad = {k: v for k, v in sizes.items() if v < 1 or (k == "channels" and v % 8)}
        if bad:
            raise ValueError(
                f"ECAPATDNNExtractor: sizes must be positive, channels a multiple of 8; got {bad}"
            )
        self.arch = arch
        self.normalise_features = normalise_features
        self.model = ECAPATDNN(**sizes)
        load_weights(
            self,
            weights,
            target=self.model,
            ignore=("criterion.", RELEASE_LOSS_PREFIX),
            prefixes=(*WRAPPER_PREFIXES, RELEASE_PREFIX),
        )

    def load_pretrained(self, state_dict: dict[str, Tensor], source: str) -> None:
        """Load a zoo checkpoint (converted by :func:`release_to_network`) strictly into :attr:`model`.

        Raises:
            CheckpointError: missing or unexpected keys, or shapes that differ; the message names ``source``.
        """
        load_state_dict_strict(self.model, state_dict, source)

    @property
    def feat_dim(self) -> int:
        """The embedding size (``fc6``'s outputs)."""
        return self.model.fc6.out_features

    def forward(self, x: Tensor) -> Tensor:
        """Embeddings ``[B, feat_dim]`` of waveforms ``[B, samples]`` or ``[B, 1, samples]``.

        Raises:
            ValueError: another shape (e.g. stereo ``[B, 2, samples]``: down-mix it first).
        """
        if x.ndim == 3 and x.shape[1] == 1:
            x = x.squeeze(1)
        if x.ndim != 2:
            raise ValueError(
                f"ECAPATDNNExtractor takes waveforms [batch, samples] or [batch, 1, samples], got {list(x.shape)}"
            )
        x = self.model(x)
        return F.normalize(x, p=2, dim=1) if self.normalise_features else x

    def export_signature(self, context: ExportContext) -> ExportSignature:
        """Mono waveforms ``waveforms`` float32 ``[batch, 1, samples]`` (what the audio datasets give with
        ``convert_to_mono``), any number of samples from :data:`MIN_EXPORT_SAMPLES`; the features are inside the
        graph (torch's exporter writes the STFT); the preprocessing: the dataset's sample rate, length in seconds
        and down-mixing."""
        args = context.dataset_args
        sample_rate = args.get("sample_rate", DEFAULT_SAMPLE_RATE)

        def example_inputs(batch_size: int, generator: torch.Generator) -> tuple[Tensor, ...]:
            low, high = EXAMPLE_SAMPLES
            samples = int(torch.randint(low, high + 1, (), generator=generator))
            return (0.1 * torch.randn(batch_size, 1, samples, generator=generator),)

        preprocessing = {
            "modality": "audio",
            "input": "float32 [batch, 1, samples]: mono waveforms in [-1, 1] at sample_rate",
            "sample_rate": sample_rate,
            "max_num_seconds": args.get("max_num_seconds", MAX_AUDIO_LEN),
            "convert_to_mono": args.get("convert_to_mono", True),
            "features": FEATURES,
        }
        return ExportSignature(
            module=self,
            input_names=(WAVEFORMS_INPUT,),
            dynamic_axes={WAVEFORMS_INPUT: {0: BATCH_AXIS, 2: SAMPLES_AXIS}},
            example_inputs=example_inputs,
            preprocessing=preprocessing,
            min_sizes={SAMPLES_AXIS: MIN_EXPORT_SAMPLES},
        )


__all__ = [
    "ECAPATDNN",
    "ECAPATDNNExtractor",
    "EXAMPLE_SAMPLES",
    "FEATURES",
    "MIN_EXPORT_SAMPLES",
    "SAMPLES_AXIS",
    "WAVEFORMS_INPUT",
    "SERes2Block",
    "SqueezeExcitation",
    "release_to_network",
]
