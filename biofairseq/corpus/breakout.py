"""Entity break-out rate of a vocabulary (BioMegatron, Table 3): subword tokens per word over entity mentions.

Words are those of sacremoses' Moses tokenizer for the corpus language. A mention is encoded as it appears
after a space inside a sentence; "all text" encodes each line (BRAT) or sentence (CoNLL) as it is.
"""

from collections import defaultdict
from pathlib import Path

from biofairseq.corpus.tables import markdown_table
from biofairseq.corpus.vocab import Encoder


class NERFormatError(Exception):
    pass


def brat_mentions(folder):
    """(type, mention text) of every entity in a BRAT folder, and the lines of its texts."""
    mentions, lines = [], []
    anns = sorted(Path(folder).rglob("*.ann"))
    if not anns:
        raise NERFormatError(f"{folder}: no .ann files; give a BRAT folder or a CoNLL file")
    for ann in anns:
        txt = ann.with_suffix(".txt")
        if not txt.is_file():
            raise NERFormatError(f"{ann}: BRAT file without its .txt; add it or remove the .ann")
        text = txt.read_text(encoding="utf-8")
        lines += [line for line in text.splitlines() if line.strip()]
        for n, line in enumerate(ann.read_text(encoding="utf-8").splitlines(), 1):
            if not line.startswith("T"):
                continue  # notes (#), relations, events
            try:
                _, span, _ = line.split("\t", 2)
                kind, offsets = span.split(" ", 1)
                parts = [tuple(map(int, p.split())) for p in offsets.split(";")]
            except ValueError:
                raise NERFormatError(f"{ann}:{n}: not a BRAT entity line (T<n>\\tTYPE START END\\tTEXT)") from None
            mentions.append((kind, " ".join(text[s:e] for s, e in parts)))
    return mentions, lines


def conll_mentions(path):
    """(type, mention text) of every BIO entity in a token<TAB>tag file, and its sentences."""
    mentions, lines, tokens, current = [], [], [], None
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate([*f, "\n"], 1):
            fields = raw.rstrip("\n").split("\t")
            if not raw.strip():
                if current:
                    mentions.append(current)
                if tokens:
                    lines.append(" ".join(tokens))
                tokens, current = [], None
                continue
            if len(fields) < 2:
                raise NERFormatError(f"{path}:{n}: expected token<TAB>tag; fix the line")
            token, tag = fields[0], fields[-1]
            tokens.append(token)
            if tag.startswith("B-") or (tag.startswith("I-") and (current is None or current[0] != tag[2:])):
                if current:
                    mentions.append(current)
                current = (tag[2:], token)
            elif tag.startswith("I-"):
                current = (current[0], f"{current[1]} {token}")
            else:
                if current:
                    mentions.append(current)
                current = None
    return mentions, lines


def read_ner(path):
    return brat_mentions(path) if Path(path).is_dir() else conll_mentions(path)


def breakout_rates(vocab_dirs, ner_path, lang):
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


def format_rates(rows, names):
    header = ["", "mentions", "words", *names]
    return markdown_table(header, [[row, f"{r['mentions']:,}", f"{r['words']:,}", *(f"{r[n]:.3f}" for n in names)] for row, r in rows.items()])
