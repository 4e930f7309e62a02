"""Normalisation constants of the pretrained models (no torch import: the zoo tables use them too)."""

#: Mean and std of the images CLIP was trained on (OpenAI's), for the CLIP and Unicom checkpoints.
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
#: The colour OML pads images with (white).
PAD_COLOR = (255, 255, 255)

__all__ = ["CLIP_MEAN", "CLIP_STD", "PAD_COLOR"]
