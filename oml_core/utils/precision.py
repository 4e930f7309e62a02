"""Full precision inside mixed-precision runs: what is computed in float32 whatever autocast is on.

Under ``torch.autocast`` (Lightning's ``16-mixed`` / ``bf16-mixed``) a matrix multiply gives float16 or
bfloat16 while a norm gives float32, so code that mixes the two (an in-place write of one into the other)
fails, and distances or losses computed in 16 bits lose the ordering of close pairs (float16 keeps about 3
decimal digits). Losses, distances and the embeddings that metrics are computed on are therefore taken out of
autocast and promoted to float32 with :func:`full_precision`; the extractor itself still runs in mixed precision.

Outside autocast, CUDA's convolutions are float32 in name only: cuDNN computes them in TF32 (10 bits of
mantissa) unless told not to, which moves a ResNet's embeddings by ~1e-3 relative from the CPU's.
:func:`without_tf32` computes them in float32, where embeddings must not depend on the device (a gallery index).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor

#: The floating-point types that :func:`to_full_precision` promotes to float32.
LOW_PRECISION_DTYPES = (torch.float16, torch.bfloat16)


def to_full_precision(tensor: Tensor) -> Tensor:
    """``tensor`` as float32 if it is float16 or bfloat16 (a differentiable copy), else ``tensor`` itself."""
    return tensor.float() if tensor.dtype in LOW_PRECISION_DTYPES else tensor


@contextmanager
def full_precision(device: torch.device | str) -> Iterator[None]:
    """Switch autocast off on ``device``'s type inside the block (nothing to do where it is not on).

    Example::

        with full_precision(embeddings.device):
            loss = criterion(to_full_precision(embeddings), labels)
    """
    device_type = torch.device(device).type
    if torch.amp.is_autocast_available(device_type) and torch.is_autocast_enabled(device_type):
        with torch.autocast(device_type, enabled=False):
            yield
    else:
        yield


@contextmanager
def without_tf32() -> Iterator[None]:
    """Compute CUDA's float32 convolutions and matrix products in float32 inside the block, not TF32 (torch's
    ``backends.cudnn.allow_tf32``, on by default, and ``backends.cuda.matmul.allow_tf32``, off by default, both
    off), then restore both flags. Nothing changes on the CPU. The flags are the process's: not for threads that
    run CUDA work of their own at the same time."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved
