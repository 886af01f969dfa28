"""Docstring parsing for Python tool descriptions."""

from __future__ import annotations

from teamrun.tools._docstrings import parse_docstring


def test_none_and_plain() -> None:
    assert parse_docstring(None).summary == ""
    info = parse_docstring("Do a thing\nover two lines.\n\nMore detail here.")
    assert info.summary == "Do a thing over two lines."
    assert info.params == {}


def test_google_sections() -> None:
    info = parse_docstring(
        """Search.

        Args:
            pattern (str): What to find.
            path: Where to look,
                relative to the project.
            *args: ignored extras.

        Returns:
            matches: not a parameter.
        """
    )
    assert info.summary == "Search."
    assert info.params == {
        "pattern": "What to find.",
        "path": "Where to look, relative to the project.",
        "args": "ignored extras.",
    }


def test_rest_fields() -> None:
    info = parse_docstring(
        """Search.
        :param pattern: What to find.
        :param str path: Where to look,
            relative to the project.
        :returns: matches.
        """
    )
    assert info.summary == "Search."
    assert info.params == {
        "pattern": "What to find.",
        "path": "Where to look, relative to the project.",
    }
