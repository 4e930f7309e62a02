"""The plugin module of the ``oml_audio`` plugin (entry point ``oml_audio = "oml_audio.plugin"``).

:data:`COMPONENTS` is the plugin's one table: the dataset component ``audios``, the extractor ``ecapa_tdnn`` and its
pretrained checkpoint. It is declared as ``OML_COMPONENTS`` (the registry registers it), and the package
``oml_audio`` takes its lazy exports and ``__all__`` from it and from :data:`EXTRA_EXPORTS`. Factories are lazy
``"module:attr"`` strings (the checkpoint's is the ``PretrainedModel`` factory of :data:`oml_audio.zoo.PRETRAINED`,
metadata only), so that loading the plugin imports neither torch, soundfile nor scipy. The default config of a
component ``name`` of kind ``kind`` is ``oml_audio/configs/<kind>/<name>.yaml``."""

from __future__ import annotations

from types import MappingProxyType

from oml_audio.zoo import PRETRAINED
from oml_core.utils.lazy import Component

#: Every component of the plugin; the dataset component and the extractor are exported by ``oml_audio``.
COMPONENTS: tuple[Component, ...] = (
    Component(
        "dataset",
        "audios",
        "oml_audio.data:AudioData",
        "audio files of a dataframe in OML's format (soundfile), resampled, down-mixed, cropped from start_time",
    ),
    Component(
        "extractor",
        "ecapa_tdnn",
        "oml_audio.ecapa:ECAPATDNNExtractor",
        "ECAPA-TDNN on log mel filterbanks of 16 kHz waveforms (OML's ecapa_tdnn_taoruijie)",
    ),
    *(
        Component("pretrained", key, factory, factory().description, export=False)
        for key, factory in PRETRAINED.items()
    ),
)

#: The other public names of ``oml_audio`` (OML's datasets and helpers, not components): ``{name: module}``.
EXTRA_EXPORTS: MappingProxyType[str, str] = MappingProxyType(
    {
        "AudioBaseDataset": "oml_audio.datasets",
        "AudioLabeledDataset": "oml_audio.datasets",
        "AudioQueryGalleryDataset": "oml_audio.datasets",
        "AudioQueryGalleryLabeledDataset": "oml_audio.datasets",
        "parse_start_times": "oml_audio.datasets",
        "get_mock_audios_dataset": "oml_audio.mock",
        "default_spec_repr_func": "oml_audio.visualisation",
        "visualize_audio": "oml_audio.visualisation",
        "visualize_audio_with_player": "oml_audio.visualisation",
    }
)

#: The declarations the registry reads (no hook function): the table, and the package of the default configs
#: (``<kind>/<name>.yaml``).
OML_COMPONENTS = COMPONENTS
OML_CONFIG_DIRS = ("pkg://oml_audio.configs",)
