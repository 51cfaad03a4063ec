"""Text every store can keep: no NUL character (PostgreSQL refuses it in text) and valid
Unicode (a lone surrogate cannot be encoded). One validator for the server's request
models and the agents file."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator


def storable(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode (no lone surrogates)") from None
    return value


Text = Annotated[str, AfterValidator(storable)]
"""A string that passes ``storable``."""
