"""oml plugin package ``oml_audio``: OML's audio datasets (read with soundfile), the ``audios`` dataset component,
the ECAPA-TDNN extractor with its pretrained checkpoint, and the mock audio dataset.

``from oml_audio import AudioLabeledDataset, ECAPATDNNExtractor``; the plugin (:mod:`oml_audio.plugin`) registers
the components under OML's names. The public names are imported lazily (PEP 562), so that loading the plugin's
entry point imports neither soundfile nor scipy; they come from the plugin's table
(:data:`oml_audio.plugin.COMPONENTS` and :data:`~oml_audio.plugin.EXTRA_EXPORTS`), and the imports below,
explicit re-exports, are for static type checkers and IDEs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oml_audio.plugin import COMPONENTS, EXTRA_EXPORTS
from oml_core.utils.lazy import table_exports

if TYPE_CHECKING:
    from oml_audio.data import AudioData as AudioData
    from oml_audio.datasets import AudioBaseDataset as AudioBaseDataset
    from oml_audio.datasets import AudioLabeledDataset as AudioLabeledDataset
    from oml_audio.datasets import AudioQueryGalleryDataset as AudioQueryGalleryDataset
    from oml_audio.datasets import AudioQueryGalleryLabeledDataset as AudioQueryGalleryLabeledDataset
    from oml_audio.datasets import parse_start_times as parse_start_times
    from oml_audio.ecapa import ECAPATDNNExtractor as ECAPATDNNExtractor
    from oml_audio.mock import get_mock_audios_dataset as get_mock_audios_dataset
    from oml_audio.visualisation import default_spec_repr_func as default_spec_repr_func
    from oml_audio.visualisation import visualize_audio as visualize_audio
    from oml_audio.visualisation import visualize_audio_with_player as visualize_audio_with_player

__getattr__, __dir__, __all__ = table_exports(__name__, COMPONENTS, EXTRA_EXPORTS)
