"""The error a conversion or its validation raises: the artifact is not written."""

from __future__ import annotations


class ExportError(Exception):
    """A format failed to convert or to validate; the message names the format and the cause."""
