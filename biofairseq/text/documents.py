"""The one definition of a document boundary in text: a blank line, for every reader and splitter of the corpus.

A line is blank when it holds nothing but ASCII whitespace (space, tab, CR, LF, form feed, vertical tab), which is
what ``bytes.strip()`` removes: raw inputs are split as bytes, before they are decoded, and cleaned or encoded text as
str, and both must find the same documents. A line of Unicode spaces only (U+00A0, U+3000) is not blank: it belongs to
its document. The cleaner writes an empty line between documents, and encode.py writes an empty line for each blank
one: fairseq binarizes a line without tokens as a lone </s>, the data-bin's document separator.
"""

import re

_SPACE = " \t\r\n\f\v"
_SPACE_BYTES = _SPACE.encode("ascii")
# a line end followed by a blank line, in bytes: where a large text file can be cut between documents
BLANK_LINE = re.compile(rb"\n[ \t\r\f\v]*\n")


def is_blank(line: str | bytes) -> bool:
    """Whether a line (bytes or str, with or without its line end) separates documents."""
    return not line.strip(_SPACE if isinstance(line, str) else _SPACE_BYTES)
