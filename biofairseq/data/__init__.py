"""fairseq datasets that the biofairseq tasks compose."""

from .document_blocks import BREAK_MODES, DocumentBlockDataset
from .whole_words import VOCAB_TYPES, WordStarts, word_starts

__all__ = ["BREAK_MODES", "DocumentBlockDataset", "VOCAB_TYPES", "WordStarts", "word_starts"]
