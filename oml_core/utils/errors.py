"""Error types that are also OML 4.0's: where OML checks an argument with ``assert`` (so a caller of OML catches
``AssertionError``) and oml raises a ``ValueError`` or ``TypeError`` that names the argument, oml's error is an
instance of both, so that code written for either catches it.

Use them in place of ``ValueError`` / ``TypeError`` wherever OML 4.0 asserts in the same case; subclass them for
an error type of one's own (``class DataFrameFormatError(OmlValueError)``).
"""

from __future__ import annotations


class OmlValueError(ValueError, AssertionError):
    """A bad argument value: a ``ValueError`` (oml) and an ``AssertionError`` (OML 4.0's ``assert``)."""


class OmlTypeError(TypeError, AssertionError):
    """An argument of the wrong type: a ``TypeError`` (oml) and an ``AssertionError`` (OML 4.0's ``assert``)."""


__all__ = ["OmlTypeError", "OmlValueError"]
