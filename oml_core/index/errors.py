"""The error of a gallery index that a user can fix."""

from __future__ import annotations


class GalleryIndexError(ValueError):
    """Bad input to a gallery index: a missing, foreign or corrupt index folder (the message names the file at
    fault), an image that cannot be read (named), or an extractor that cannot be built from the stored config.

    The message is one line: its white space (the new lines of a wrapped error's message) is folded.
    """

    def __init__(self, message: object) -> None:
        super().__init__(" ".join(str(message).split()))


__all__ = ["GalleryIndexError"]
