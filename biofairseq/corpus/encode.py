"""Cleaned text -> fairseq-lm text of vocabulary symbols, streaming, blank document separators kept."""

import os
from itertools import islice
from pathlib import Path

from biofairseq.corpus.vocab import Encoder


def encode_file(vocab_dir, src, dest, threads=1, batch_lines=20_000, progress=False):
    """Encodes src line by line into dest (atomically); returns (lines, tokens)."""
    encoder = Encoder(vocab_dir)
    tmp = Path(f"{dest}.tmp")
    lines = tokens = 0
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=os.path.getsize(src), unit="B", unit_scale=True, desc=f"encoding {Path(src).name}")
    with open(src, encoding="utf-8") as f, open(tmp, "w", encoding="utf-8") as out:
        while True:
            batch = [line.rstrip("\n") for line in islice(f, batch_lines)]
            if not batch:
                break
            texts = [line for line in batch if line.strip()]
            encoded = iter(encoder.encode_lines(texts, threads))
            for line in batch:
                symbols = next(encoded) if line.strip() else ""
                tokens += symbols.count(" ") + 1 if symbols else 0
                out.write(symbols + "\n")
            lines += len(batch)
            if bar:
                bar.update(sum(len(line.encode("utf-8")) + 1 for line in batch))
    if bar:
        bar.close()
    os.replace(tmp, dest)
    return lines, tokens
