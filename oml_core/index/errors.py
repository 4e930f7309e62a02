"""The errors of a gallery index that a user can fix."""

from __future__ import annotations

from collections.abc import Sequence


class GalleryIndexError(ValueError):
    """Bad input to a gallery index: a missing, foreign or corrupt index folder (the message names the file at
    fault), an image that cannot be read (named), or an extractor that cannot be built from the stored config.

    The message is one line: its white space (the new lines of a wrapped error's message) is folded.
    """

    def __init__(self, message: object) -> None:
        super().__init__(" ".join(str(message).split()))


class UnknownItemError(GalleryIndexError):
    """Ids that no item of the index has (asked for, or to remove); nothing was changed.

    Attributes:
        ids: The unknown ids, in the order given.
    """

    def __init__(self, ids: Sequence[int], where: object) -> None:
        self.ids = list(ids)
        shown = ", ".join(str(i) for i in self.ids[:5]) + (", ..." if len(self.ids) > 5 else "")
        noun = "id" if len(self.ids) == 1 else f"{len(self.ids)} ids"
        super().__init__(f"{where}: no item has the {noun} {shown}")


class IndexLockedError(GalleryIndexError):
    """Another process held the index's writer lock for longer than the wait allowed; nothing was written."""


__all__ = ["GalleryIndexError", "IndexLockedError", "UnknownItemError"]
