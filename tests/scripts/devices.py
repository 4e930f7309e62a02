"""The overrides that ask for a GPU this machine lacks, for the tests of the pipelines' device checks."""

from __future__ import annotations

import torch


def no_gpu_case() -> tuple[list[str], str]:
    """Overrides that ask for a GPU this machine lacks, and the pipelines' line for them: ``accelerator=gpu``
    without CUDA; with CUDA, the GPU after the last one."""
    if not torch.cuda.is_available():
        return ["accelerator=gpu"], "accelerator: 'gpu', but this machine has no CUDA GPU (use cpu)"
    n = torch.cuda.device_count()
    return ["accelerator=gpu", f"devices=[{n}]"], f"devices: [{n}], but this machine has {n} CUDA GPU(s)"
