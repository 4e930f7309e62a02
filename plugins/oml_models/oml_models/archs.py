"""The ``arch`` argument of this plugin's extractors: a key of the extractor's ``constructors``."""

from __future__ import annotations

from oml_core.interfaces.models import IExtractor


def check_arch(arch: str, extractor: type[IExtractor]) -> str:
    """``arch`` itself when it is a key of ``extractor.constructors``.

    Raises:
        ValueError: an unknown ``arch``; the message lists the known ones.
    """
    if arch not in extractor.constructors:
        known = ", ".join(extractor.constructors)
        raise ValueError(f"Unknown arch {arch!r} of {extractor.__name__}; known archs: {known}")
    return arch


__all__ = ["check_arch"]
