"""The check that every image of a run can be read, made before any model runs: a missing, unreadable or
truncated file, or a box outside its image, fails in seconds with one line naming the rows and files."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from oml_core.registry import ConfigError
from oml_core.utils.terminal import on_terminal
from oml_core.utils.text import one_line

#: How many files (or rows) at fault an error message names (the rest are counted).
MAX_FILES_NAMED = 5


def check_images(
    paths: Sequence[Path],
    f_imread: Callable[[Path], Any],
    num_workers: int,
    pipeline: str,
    progress_bar: bool | None = None,
    bboxes: Sequence[tuple[int, int, int, int] | None] | None = None,
    rows: Sequence[int] | None = None,
) -> list[str]:
    """Read every image once (``num_workers`` threads at a time) before any model runs: a missing, unreadable,
    truncated or empty file, or a decompression bomb (PIL's limit), fails; with ``bboxes`` (``(x1, y1, x2,
    y2)`` or None per image) a box that lies wholly outside its image fails too, and one that crosses the
    image's edge (it is cropped to the image) is a warning.

    Args:
        paths: The image files.
        f_imread: The dataset's reader (it decodes the whole image).
        num_workers: Threads to read with.
        pipeline: Names the pipeline in the message.
        progress_bar: Show a progress bar; None: only on a terminal (the pipelines' default, see
            :func:`~oml_core.lightning.progress.progress_bar_enabled`).
        bboxes: The box of every image, or None.
        rows: The dataframe row of every image (0-based data rows, as ``oml check-dataframe`` names them),
            named in the messages instead of the paths alone.

    Returns:
        The warnings (boxes cropped to their images), one line each.

    Raises:
        ConfigError: files that cannot be read or boxes outside their images; one line that counts them and
            names the first :data:`MAX_FILES_NAMED`, each with its row and error.
    """

    def where(i: int) -> str:
        return f"row {rows[i]} {str(paths[i])!r}" if rows is not None else repr(str(paths[i]))

    def problem(i: int) -> tuple[str, str] | None:
        """``(what, message)``: ``what`` is ``unreadable``, ``outside`` or ``crossing``; None for a good image."""
        try:
            image = f_imread(paths[i])
        except Exception as e:  # whatever the reader raises (a decompression bomb too), the file is reported
            return "unreadable", f"{where(i)} ({one_line(e)})"
        box = bboxes[i] if bboxes is not None else None
        if box is None:
            return None
        width, height = _width_height(image)
        x1, y1, x2, y2 = box
        if x1 >= width or y1 >= height:
            return "outside", f"{where(i)}: ({x1}, {y1}, {x2}, {y2}) in a {width}x{height} image"
        if x2 > width or y2 > height:
            return "crossing", f"{where(i)}: ({x1}, {y1}, {x2}, {y2}) in a {width}x{height} image"
        return None

    if progress_bar is None:
        progress_bar = on_terminal()
    with ThreadPoolExecutor(max_workers=max(1, int(num_workers))) as pool:
        found = [
            p
            for p in tqdm(
                pool.map(problem, range(len(paths))),
                total=len(paths),
                desc="Checking images",
                disable=not progress_bar,
            )
            if p is not None
        ]
    unreadable, outside, crossing = (
        [m for w, m in found if w == what] for what in ("unreadable", "outside", "crossing")
    )
    if unreadable:
        raise ConfigError(
            f"{pipeline}: {len(unreadable)} of {len(paths)} image files cannot be read: {_named(unreadable)}"
        )
    if outside:
        raise ConfigError(f"{pipeline}: {len(outside)} boxes lie outside their images: {_named(outside)}")
    return (
        [f"{len(crossing)} boxes cross the edge of their images (cropped to them): {_named(crossing)}"]
        if crossing
        else []
    )


def _width_height(image: Any) -> tuple[int, int]:
    """``(width, height)`` of a PIL image or of a ``[height, width, ...]`` array."""
    if hasattr(image, "shape"):
        return int(image.shape[1]), int(image.shape[0])
    return image.size


def _named(items: Sequence[str]) -> str:
    more = f"; and {len(items) - MAX_FILES_NAMED} more" if len(items) > MAX_FILES_NAMED else ""
    return "; ".join(items[:MAX_FILES_NAMED]) + more


__all__ = ["MAX_FILES_NAMED", "check_images"]
