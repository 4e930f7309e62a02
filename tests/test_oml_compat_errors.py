"""oml's errors that are also OML 4.0's ``AssertionError`` (``oml_core.utils.errors``): code written for OML,
which catches ``AssertionError``, and code written for oml, which catches ``ValueError``/``TypeError``, both
catch them."""

from __future__ import annotations

import pytest

from oml_core.utils.errors import OmlTypeError, OmlValueError


@pytest.mark.parametrize(("error", "oml_type"), [(OmlValueError, ValueError), (OmlTypeError, TypeError)])
def test_the_error_is_caught_as_oml_type_and_as_assertion_error(error, oml_type):
    for caught in (oml_type, AssertionError):
        with pytest.raises(caught, match="^lr must be positive, got -1$"):
            raise error("lr must be positive, got -1")


def test_a_subclass_keeps_both_bases():
    class FormatError(OmlValueError):
        pass

    assert issubclass(FormatError, ValueError) and issubclass(FormatError, AssertionError)
    assert not issubclass(OmlValueError, TypeError) and not issubclass(OmlTypeError, ValueError)
