"""Masked LM trained at the document level, as bsc-bio-es was."""

import logging
import os
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
from fairseq import utils
from fairseq.data import (
    Dictionary,
    MaskTokensDataset,
    NestedDictionaryDataset,
    PrependTokenDataset,
    RightPadDataset,
    SortDataset,
    data_utils,
)
from fairseq.criterions import FairseqCriterion
from fairseq.criterions.masked_lm import MaskedLmLoss
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.models import BaseFairseqModel
from fairseq.tasks import register_task
from fairseq.tasks.masked_lm import MaskedLMConfig, MaskedLMTask
from omegaconf import DictConfig

from biofairseq.data import (
    BREAK_MODES,
    VOCAB_TYPES,
    DocumentBlockDataset,
    DocumentSegmentsDataset,
    PackedBlocksDataset,
    RealTokenMaskDataset,
    TargetCountDataset,
    special_symbols,
    word_starts,
)

logger = logging.getLogger(__name__)


@dataclass
class DocumentMLMConfig(MaskedLMConfig):
    sample_break_mode: ChoiceEnum(BREAK_MODES) = field(
        default="complete_doc",
        metadata={
            "help": "complete_doc: pack whole lines of one document into each sample, cutting lines longer "
            "than a sample; doc: cut each document into full samples, ignoring line ends. Samples never "
            "cross a document (a blank line in the raw text) and no token is dropped. Use --max-tokens "
            "so that batches of short samples hold more of them"
        },
    )
    tokens_per_sample: int = field(
        default=512, metadata={"help": "maximum tokens per sample, <s> included"}
    )
    mask_whole_words: bool = field(
        default=False,
        metadata={"help": "mask whole words instead of subwords; word starts come from --vocab-type"},
    )
    vocab_type: ChoiceEnum(VOCAB_TYPES) = field(
        default="bytebpe",
        metadata={"help": "how the vocabulary marks word starts: bytebpe (Ġ), sentencepiece (▁) or wordpiece (## marks "
                  "the others)"},
    )
    whole_word_vocab: Optional[str] = field(
        default=None,
        metadata={
            "help": "vocab.json (bytebpe) or .model (sentencepiece) mapping dict.txt ids to pieces; "
            "needed with --mask-whole-words when dict.txt holds BPE ids rather than pieces, unless the "
            "data-bin came from preprocess/binarize.sh, which records its vocabulary (vocab_info.json)"
        },
    )
    pack_documents: bool = field(
        default=False,
        metadata={
            "help": "fill each row with several whole blocks (best fit), up to --tokens-per-sample: far less padding "
            "and fuller batches. The model restarts positions at each block's <s> and attends only within a "
            "block (through a document mask), so each computes what it would alone in a row. Needs "
            "--attention sdpa (a bio_roberta_* preset, or ELECTRA)"
        },
    )
    lm_head_only: bool = field(
        default=False,
        metadata={
            "help": "train the LM head's own weights alone (its transform and output bias), every other weight held "
            "fixed, the output matrix that the head shares with the embeddings included: a head warm-up for a model "
            "published without a trained LM head, before the whole model trains"
        },
    )
    mask_special_tokens: bool = field(
        default=False,
        metadata={
            "help": "mask as stock fairseq masked_lm does: <s> and </s> may be selected for prediction and "
            "<mask> or madeupword may be drawn as random replacements. Only for reproducing models trained "
            "with fairseq's masked_lm; by default (BERT's and ELECTRA's convention) only real tokens are "
            "selected and drawn, and masked-token accuracy counts real tokens"
        },
    )


def _dictionary_path(cfg):
    return os.path.join(utils.split_paths(cfg.data)[0], "dict.txt")


def _recorded_vocabulary(cfg):
    """(vocab type, file) from the vocab_info.json that preprocess/binarize.sh leaves in the data-bin."""
    from biofairseq.corpus.vocab import INFO, vocab_files

    data = utils.split_paths(cfg.data)[0]
    if not os.path.isfile(os.path.join(data, INFO)):
        return None
    vocab_type, files = vocab_files(data)
    if vocab_type == "bytelevel-bpe":
        return "bytebpe", files["vocab"]
    if vocab_type == "wordpiece":  # dict.txt holds the tokens themselves, "##" marking a word's later pieces
        return "wordpiece", files["vocab"]
    return "sentencepiece", files["model"]


def hold_all_but_lm_head(model: BaseFairseqModel) -> None:
    """Every parameter fixed (fairseq's trainer optimizes only those that require a gradient) but the LM head's own:
    the output matrix it shares with the embeddings stays with them."""
    head = getattr(getattr(model, "encoder", None), "lm_head", None)
    if head is None:
        raise ValueError(f"--lm-head-only: {type(model).__name__} has no encoder.lm_head to train alone")
    shared = {id(p) for name, p in model.named_parameters(remove_duplicate=False) if not name.startswith("encoder.lm_head.")}
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    for parameter in head.parameters():
        if id(parameter) not in shared:
            parameter.requires_grad_(True)
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    logger.info(f"--lm-head-only: training the LM head's {trained:,} weights; the other "
                f"{sum(p.numel() for p in model.parameters()) - trained:,} held fixed")


@register_task("document_mlm", dataclass=DocumentMLMConfig)
class DocumentMLMTask(MaskedLMTask):
    """RoBERTa masked LM whose samples stay inside one document, with working whole-word masking."""

    cfg: DocumentMLMConfig
    # The criteria whose numbers mean what they say on this task's batches, and what to tell a user of another.
    # fairseq's cross_entropy (fairseq-train's default) trains too, but divides the masked tokens' loss by every token.
    CRITERIA = (MaskedLmLoss,)
    CRITERION_ADVICE = ("it would divide the masked tokens' loss by every token and log a perplexity far better than "
                        "the model's; use --criterion masked_lm_accuracy (or fairseq's masked_lm)")

    def __init__(self, cfg: DocumentMLMConfig, dictionary: Optional[Dictionary] = None) -> None:
        # Inherited from masked_lm, but meaningless here: samples are never truncated, and data2vec's
        # multi-input layout is not built. Refuse rather than ignore them.
        if cfg.shorten_method != "none":
            raise ValueError("--shorten-method: document_mlm never truncates (long documents are cut into blocks); drop the flag")
        if cfg.d2v2_multi:
            raise ValueError("--d2v2-multi: not supported by document_mlm; use --task masked_lm for data2vec")
        if cfg.pack_documents and cfg.mask_special_tokens:
            raise ValueError("--pack-documents with --mask-special-tokens: a masked <s> would join two documents; drop one")
        if not cfg.mask_special_tokens and (cfg.mask_multiple_length != 1 or cfg.mask_stdev != 0):
            raise ValueError("--mask-multiple-length/--mask-stdev: span masking is stock fairseq's; add --mask-special-tokens to use fairseq's masking, or drop the flags")
        super().__init__(cfg, dictionary)
        if cfg.freq_weighted_replacement and len(set(np.array(self.dictionary.count)[~special_symbols(self.dictionary)])) <= 1:
            raise ValueError(
                f"--freq-weighted-replacement: {_dictionary_path(cfg)} holds no token counts (all equal), so "
                "replacements would be drawn uniformly; binarize with preprocess/binarize.sh, which writes the "
                "training counts, or drop the flag"
            )
        self._word_starts = None
        if cfg.mask_whole_words:
            vocab_type, vocab_file = cfg.vocab_type, cfg.whole_word_vocab
            if vocab_file is None:
                vocab_type, vocab_file = _recorded_vocabulary(cfg) or (vocab_type, None)
            self._word_starts = word_starts(
                self.dictionary, vocab_type, vocab_file, dictionary_path=_dictionary_path(cfg)
            )

    def build_criterion(self, cfg: DictConfig, from_checkpoint: bool = False) -> FairseqCriterion:
        criterion = super().build_criterion(cfg, from_checkpoint)
        if not isinstance(criterion, self.CRITERIA):
            default = " (fairseq-train's default)" if cfg._name == "cross_entropy" else ""
            raise ValueError(f"--criterion {cfg._name}{default}: not a loss for this task's masked batches: {self.CRITERION_ADVICE}")
        return criterion

    @classmethod
    def load_dict(cls, cfg: DocumentMLMConfig) -> Dictionary:
        path = _dictionary_path(cfg)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: no dictionary; --data must be a fairseq-preprocess --only-source output folder")
        return super().load_dict(cfg)

    def _load_blocks(self, split, epoch, combine):
        """(the split's document blocks, each beginning with <s>; the split's path, beside which indexes go)."""
        paths = utils.split_paths(self.cfg.data)
        k = (epoch - 1) % len(paths)
        # a split in one shard only (the valid split, in shard0) is read from it, whatever shard the path starts at
        # (a recipe's phase 2 starts at the shard after phase 1's, biofairseq.training_state)
        shard = next((p for p in paths[k:] + paths[:k] if os.path.isfile(os.path.join(p, f"{split}.idx"))), paths[k])
        split_path = os.path.join(shard, split)
        lines = data_utils.load_indexed_dataset(split_path, self.source_dictionary, combine=combine)
        if lines is None or len(lines) == 0:
            raise FileNotFoundError(f"{split_path}.bin: no such dataset or it is empty; binarize the {split} text with fairseq-preprocess --only-source")
        blocks = DocumentBlockDataset(
            lines,
            lines.sizes,
            self.cfg.tokens_per_sample - 1,  # one less for <s>
            pad=self.source_dictionary.pad(),
            eos=self.source_dictionary.eos(),
            break_mode=self.cfg.sample_break_mode,
            index_path=split_path,  # built once beside the split, memory-mapped by every rank and run after
        )
        logger.info(f"loaded {len(blocks)} {self.cfg.sample_break_mode} blocks from {len(lines)} lines of {split_path}")
        return PrependTokenDataset(blocks, self.source_dictionary.bos()), split_path

    def _packed_rows(self, blocks, split_path):
        """With --pack-documents, the rows ``blocks`` are packed into (``PackedBlocksDataset``); else None."""
        if not self.cfg.pack_documents:
            return None
        rows = PackedBlocksDataset(blocks, self.cfg.tokens_per_sample, index_path=split_path)
        logger.info(f"packed {len(blocks)} blocks into {len(rows)} rows of at most {self.cfg.tokens_per_sample} tokens "
                    f"({100 * rows.sizes.sum() / (len(rows) * self.cfg.tokens_per_sample):.1f}% full)")
        return rows

    def build_model(self, cfg: FairseqDataclass, from_checkpoint: bool = False) -> BaseFairseqModel:
        """The model, built for packed rows with --pack-documents (it reads the task's cfg, see
        ``biofairseq.models.documents.packed_bos``)."""
        model = super().build_model(cfg, from_checkpoint)
        if self.cfg.pack_documents and not getattr(model, "reads_packed_rows", False):
            raise ValueError(f"--pack-documents: {type(model).__name__} does not read packed rows; use a bio_roberta_*, "
                             "bio_megatron_* or electra_* preset")
        if self.cfg.lm_head_only:
            hold_all_but_lm_head(model)
        return model

    def _regular_dataset(self, src_dataset, target_dataset):
        dataset = super()._regular_dataset(src_dataset, target_dataset)
        # the count of predicted tokens, as fairseq counts ntokens: on the host (biofairseq.data.host_counts)
        extra = {"ntargets": TargetCountDataset(target_dataset, self.source_dictionary.pad())}
        if self.cfg.pack_documents:
            # where each batch's documents are, for the variable-length attention (biofairseq.models.documents)
            extra["net_input.segments"] = DocumentSegmentsDataset(src_dataset, self.source_dictionary.bos())
        return NestedDictionaryDataset({**dataset.defn, **extra}, sizes=dataset.sizes)

    def masking_options(self) -> Optional[dict[str, np.ndarray | bool]]:
        """Options of our masking dataset beyond fairseq's; None: stock fairseq masking (--mask-special-tokens)."""
        # the special-symbol table, computed once for the source and target copies
        return None if self.cfg.mask_special_tokens else {"special": special_symbols(self.source_dictionary)}

    def load_dataset(self, split: str, epoch: int = 1, combine: bool = False, **kwargs: Any) -> None:
        blocks, split_path = self._load_blocks(split, epoch, combine)
        masking = self.masking_options()
        # each block is masked by itself (seeded by its index) and then packed, so that it is masked alike in either path
        source, target = (MaskTokensDataset if masking is None else RealTokenMaskDataset).apply_mask(
            blocks,
            self.source_dictionary,
            pad_idx=self.source_dictionary.pad(),
            mask_idx=self.mask_idx,
            seed=self.cfg.seed,
            mask_prob=self.cfg.mask_prob,
            leave_unmasked_prob=self.cfg.leave_unmasked_prob,
            random_token_prob=self.cfg.random_token_prob,
            freq_weighted_replacement=self.cfg.freq_weighted_replacement,
            mask_whole_words=self._word_starts,
            mask_multiple_length=self.cfg.mask_multiple_length,
            mask_stdev=self.cfg.mask_stdev,
            skip_masking=self.cfg.skip_masking,
            **(masking or {}),
        )
        rows = self._packed_rows(blocks, split_path)
        if rows is not None:
            source, target = rows.of(source), rows.of(target)
        with data_utils.numpy_seed(self.cfg.seed):
            shuffle = np.random.permutation(len(source))
        target = RightPadDataset(target, pad_idx=self.source_dictionary.pad())
        self.datasets[split] = SortDataset(
            self._regular_dataset(source, target), sort_order=[shuffle, source.sizes]
        )
