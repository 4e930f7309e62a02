"""The base of every command's answer: a dataclass of JSON-ready values, rendered as text or as JSON."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import asdict
from typing import Any


class Answer(ABC):
    """A command's answer as data. A subclass is a dataclass whose fields are JSON-ready values (None, bool,
    numbers, strings, lists and dicts of them, nested answers' dataclasses); :meth:`as_data` is its fields as a dict
    (a subclass whose JSON is not a mapping of its fields, e.g. a list of rows, says so by overriding it),
    :meth:`as_json` the same data as JSON text and :meth:`as_text` its text for a person."""

    def as_data(self) -> Any:
        """The answer as JSON-ready data: its fields as a dict, nested dataclasses as dicts."""
        return asdict(self)  # type: ignore[call-overload]  # every subclass is a dataclass

    def as_json(self) -> str:
        """:meth:`as_data` as JSON text, indented by 2."""
        return json.dumps(self.as_data(), indent=2)

    @abstractmethod
    def as_text(self) -> str:
        """The answer as the command line prints it, without the last newline."""


__all__ = ["Answer"]
