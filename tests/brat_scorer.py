"""An exact-span, exact-type micro P/R/F1 over two BRAT folders, written from the PharmaCoNER task's definition.

It shares no code with biofairseq: it reads the .ann files itself, as the official PharmaCoNER/CANTEMIST
evaluation scripts do (per document, (type, start, end) triples; notes and relations ignored).
"""

from pathlib import Path


def _triples(ann):
    out = set()
    if ann.is_file():
        for line in ann.read_text(encoding="utf-8").splitlines():
            if line.startswith("T"):
                kind, start, end = line.split("\t")[1].split(" ")[:3]
                out.add((kind, int(start), int(end.split(";")[0])))
    return out


def score(gold_dir, pred_dir):
    tp = fp = fn = 0
    for gold in sorted(Path(gold_dir).rglob("*.ann")):
        g = _triples(gold)
        p = _triples(Path(pred_dir) / gold.relative_to(gold_dir))
        tp, fp, fn = tp + len(g & p), fp + len(p - g), fn + len(g - p)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "tp": tp, "fp": fp, "fn": fn}
