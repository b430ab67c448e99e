"""Cleaned text -> fairseq-lm text of vocabulary symbols, streaming, blank document separators kept."""

import os
from itertools import islice
from pathlib import Path

from biofairseq.corpus.vocab import Encoder
from biofairseq.text.documents import is_blank


def encode_file(vocab_dir: str | Path, src: str | Path, dest: str | Path, threads: int = 1, batch_lines: int = 20_000,
                progress: bool = False) -> tuple[int, int]:
    """Encodes src line by line into dest (atomically); returns (lines written, tokens).

    Documents end where the corpus readers end them (``biofairseq.text.documents.is_blank``): lines are split at
    "\\n" alone, as the readers of bytes split them, and each blank line becomes an empty one, which fairseq binarizes
    as a lone </s>, the data-bin's separator. A line that is not blank but encodes to no symbol (SentencePiece drops a
    line of U+00A0) is left out: written empty, it would cut its document in two."""
    encoder = Encoder(vocab_dir)
    tmp = Path(f"{dest}.tmp")
    lines = tokens = 0
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=os.path.getsize(src), unit="B", unit_scale=True, desc=f"encoding {Path(src).name}")
    with open(src, encoding="utf-8", newline="\n") as f, open(tmp, "w", encoding="utf-8") as out:
        while True:
            batch = [line.rstrip("\r\n") for line in islice(f, batch_lines)]
            if not batch:
                break
            texts = [line for line in batch if not is_blank(line)]
            encoded = iter(encoder.encode_lines(texts, threads))
            for line in batch:
                blank = is_blank(line)
                symbols = "" if blank else next(encoded)
                if symbols or blank:
                    tokens += symbols.count(" ") + 1 if symbols else 0
                    out.write(symbols + "\n")
                    lines += 1
            if bar:
                bar.update(sum(len(line.encode("utf-8")) + 1 for line in batch))
    if bar:
        bar.close()
    os.replace(tmp, dest)
    return lines, tokens
