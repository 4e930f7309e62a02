"""The pretrained zoo of this plugin: OML's ``ecapa_tdnn_taoruijie``, Tao Ruijie's ECAPA-TDNN trained for speaker
verification on VoxCeleb2 (EER 0.86 % on Vox1-O, OML's zoo table). The file is the released training state
(``speaker_encoder.*`` and the loss's ``speaker_loss.weight``), converted by
:func:`oml_audio.ecapa.release_to_network`; its md5 is OML's. Metadata only: importing this module imports no
torch, and nothing is downloaded until the key is asked for and missing from the weights cache.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from oml_core.zoo import PretrainedModel

ECAPA_TDNN_TAORUIJIE_URL = "https://github.com/TaoRuijie/ECAPA-TDNN/raw/refs/heads/main/exps/pretrain.model"

#: Every checkpoint of the plugin: ``{key: factory of its PretrainedModel}``.
PRETRAINED: dict[str, Callable[[], PretrainedModel]] = {
    "ecapa_tdnn_taoruijie": partial(
        PretrainedModel,
        extractor="ecapa_tdnn",
        init_args={"arch": "ecapa_tdnn_taoruijie", "normalise_features": False},
        url=ECAPA_TDNN_TAORUIJIE_URL,
        md5="2bbc0ea09a41217eaff16b676ecb63d7",
        filename="ecapa_tdnn_taoruijie.pth",
        transforms=None,
        converter="oml_audio.ecapa:release_to_network",
        description="ECAPA-TDNN (C=1024) of Tao Ruijie, speaker verification on VoxCeleb2, 16 kHz mono",
    )
}

__all__ = ["ECAPA_TDNN_TAORUIJIE_URL", "PRETRAINED"]
