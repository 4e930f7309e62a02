"""The search page of ``oml serve`` (``GET /``): one self-contained HTML file (inline CSS and JavaScript, nothing
fetched from elsewhere) where a person drops an image, records or uploads audio, or types a text, and sees the
nearest gallery items: images as thumbnails, audio with a player, texts as text, each with its distance, label and
match verdict. It talks to the service's own API (``POST /search``, ``GET /items/{id}``, ``GET /health``)."""

from __future__ import annotations

from functools import cache
from importlib.resources import files


@cache
def page_html() -> str:
    """The page's HTML (``oml_serve/page/index.html``), read once."""
    return files("oml_serve").joinpath("page/index.html").read_text(encoding="utf-8")


__all__ = ["page_html"]
