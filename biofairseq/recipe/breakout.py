"""Entity break-out rate of a vocabulary (BioMegatron, Table 3): subword tokens per word over entity mentions.

Words are those of sacremoses' Moses tokenizer for the corpus language. A mention is encoded as it appears
after a space inside a sentence; "all text" encodes each line (BRAT) or sentence (CoNLL) as it is.
"""

from collections import defaultdict
from pathlib import Path

from biofairseq.corpus.vocab import Encoder
from biofairseq.finetune import NERFormatError
from biofairseq.text.tables import markdown_table


def read_ner(path: Path) -> tuple:
    """(type, mention text) of every entity of a BRAT folder or CoNLL file, and its lines (BRAT) or sentences (CoNLL).

    The files are read by ``biofairseq.finetune.data``, as ``biofairseq-ner`` reads them; a BRAT mention is the
    text at its offsets, a CoNLL one its tokens joined by spaces.
    """
    from biofairseq.finetune import data, iob2

    dataset = data.read(path)
    if dataset.has_documents:
        mentions = [(e.type, doc.text[e.start : e.end]) for doc in dataset.documents for e in doc.entities]
        lines = [line for doc in dataset.documents for line in doc.text.splitlines() if line.strip()]
    else:
        mentions = [(kind, " ".join(s.tokens[a:b])) for s in dataset.sentences if s.tags for a, b, kind in iob2.spans(s.tags)]
        lines = [" ".join(s.tokens) for s in dataset.sentences]
    return mentions, lines


def breakout_rates(vocab_dirs: dict, ner_path: Path, lang: str) -> dict:
    """{row: {"mentions", "words", vocab name: rate}} with one row per entity type, all mentions, all text."""
    from sacremoses import MosesTokenizer

    moses = MosesTokenizer(lang=lang)
    mentions, lines = read_ner(ner_path)
    if not mentions:
        raise NERFormatError(f"{ner_path}: no entity mentions found")
    groups = defaultdict(list)
    for kind, text in mentions:
        groups[kind].append(text)
        groups["all mentions"].append(text)
    rows = {}
    words = {k: sum(len(moses.tokenize(t, escape=False)) for t in texts) for k, texts in groups.items()}
    words["all text"] = sum(len(moses.tokenize(t, escape=False)) for t in lines)
    for name in [*sorted(k for k in groups if k != "all mentions"), "all mentions", "all text"]:
        rows[name] = {"mentions": len(groups[name]) if name != "all text" else len(lines), "words": words[name]}
    for name, vocab_dir in vocab_dirs:
        encoder = Encoder(vocab_dir)
        prefix = " " if encoder.type == "bytelevel-bpe" else ""
        for row, texts in [*groups.items(), ("all text", lines)]:
            tokens = sum(len(s.split()) for s in encoder.encode_lines([prefix + t if row != "all text" else t for t in texts]))
            rows[row][name] = tokens / rows[row]["words"]
    return rows


def format_rates(rows: dict, names: list) -> str:
    header = ["", "mentions", "words", *names]
    return markdown_table(header, [[row, f"{r['mentions']:,}", f"{r['words']:,}", *(f"{r[n]:.3f}" for n in names)] for row, r in rows.items()])
