"""Aligned Markdown tables for the reports the preprocess scripts print."""

from typing import Iterable, Sequence


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """First column left-aligned, the others right-aligned, every column as wide as its widest cell."""
    table = [list(header), *map(list, rows)]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines = []
    for j, r in enumerate(table):
        lines.append("| " + " | ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths))) + " |")
        if j == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)
