"""fairseq datasets that the biofairseq tasks compose."""

from .document_blocks import BREAK_MODES, DocumentBlockDataset
from .host_counts import TargetCountDataset
from .masking import RealTokenMaskDataset
from .packing import DocumentSegmentsDataset, PackedBlocksDataset
from .whole_words import VOCAB_TYPES, WordStarts, special_symbols, word_starts

__all__ = ["BREAK_MODES", "DocumentBlockDataset", "DocumentSegmentsDataset", "PackedBlocksDataset", "RealTokenMaskDataset", "special_symbols", "TargetCountDataset", "VOCAB_TYPES", "WordStarts", "word_starts"]
