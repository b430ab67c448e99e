"""Masked-LM noise that leaves special symbols alone: BERT's and ELECTRA's convention.

Stock fairseq (``MaskTokensDataset``) also selects ``<s>`` and ``</s>`` for prediction and may draw
``<mask>`` or a ``madeupword`` as a "random" replacement. Here only real tokens (or whole words) are
selected, the selection rate is taken over real tokens only, and replacements are drawn from real tokens.
"""

from functools import lru_cache

import numpy as np
import torch
from fairseq.data import MaskTokensDataset

from biofairseq.data.whole_words import special_symbols


class RealTokenMaskDataset(MaskTokensDataset):
    """``MaskTokensDataset`` whose selection and random replacements skip special symbols.

    The draws follow fairseq's: one seeded generator per (seed, epoch, index), probabilistic rounding of the
    number of selected units, then per unit "leave unmasked" or "random" with the same probabilities.
    Span masking (``mask_multiple_length``, ``mask_stdev``) is not supported; the task refuses it.
    """

    def __init__(self, dataset, vocab, pad_idx, mask_idx, special=None, at_least_one=False, **kwargs) -> None:
        super().__init__(dataset, vocab, pad_idx, mask_idx, **kwargs)
        self.special = special_symbols(vocab) if special is None else special
        self.at_least_one = at_least_one  # ELECTRA's: every sequence gives the generator something to predict
        if self.random_token_prob > 0.0:
            weights = np.array(vocab.count, dtype=np.float64) if kwargs.get("freq_weighted_replacement") else np.ones(len(vocab))
            weights[self.special] = 0
            self.weights = weights / weights.sum()

    @lru_cache(maxsize=8)
    def __getitem_cached__(self, seed: int, epoch: int, index: int):
        rng = np.random.default_rng(int(hash((seed, epoch, index)) % 1e6))
        item = self.dataset[index]
        tokens = item.numpy() if torch.is_tensor(item) else np.asarray(item)
        assert self.mask_idx not in tokens, f"Dataset contains mask_idx (={self.mask_idx}), this is not expected!"
        if self.skip_masking:
            return torch.from_numpy(np.copy(tokens))

        if self.mask_whole_words is not None:
            starts = self.mask_whole_words.gather(0, torch.from_numpy(tokens)).numpy().astype(bool)
            starts[0] = True
            unit_of_token = np.cumsum(starts) - 1
            # A special symbol is always a word of its own (see WordStarts), so its first token says it all.
            maskable_units = ~self.special[tokens[starts]]
        else:
            unit_of_token = np.arange(len(tokens))
            maskable_units = ~self.special[tokens]
        candidates = np.flatnonzero(maskable_units)
        count = min(len(candidates), int(self.mask_prob * len(candidates) + rng.random()))
        if self.at_least_one:
            count = max(count, min(1, len(candidates)))
        chosen = np.zeros(len(maskable_units), dtype=bool)
        chosen[rng.choice(candidates, count, replace=False)] = True

        if self.return_masked_tokens:
            mask = chosen[unit_of_token]
            target = np.full(len(tokens), self.pad_idx, dtype=tokens.dtype)
            target[mask] = tokens[mask]
            return torch.from_numpy(target)

        draw = rng.random(len(chosen))
        unmask = chosen & (draw < self.leave_unmasked_prob)
        random = chosen & ~unmask & (draw < self.leave_unmasked_prob + self.random_token_prob)
        masked = (chosen & ~unmask & ~random)[unit_of_token]
        random = random[unit_of_token]
        source = np.copy(tokens)
        source[masked] = self.mask_idx
        if random.any():
            source[random] = rng.choice(len(self.vocab), int(random.sum()), p=self.weights)
        return torch.from_numpy(source)
