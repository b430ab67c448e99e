"""Entity-level strict precision, recall and F1 (seqeval, IOB2), overall and per type."""

import warnings
from typing import Any


# What each scorer counts, as the report and the model card name it.
SCORERS = {
    "brat": "the shared tasks' official definition: the BRAT predictions against every gold mention of the .ann files, "
            "nested and overlapping ones included, exact span and type (as the PharmaCoNER and CANTEMIST official "
            "scorers count them)",
    "seqeval": "seqeval, entity level, strict IOB2 (as transformers' token-classification examples count them)",
}


def scores(gold: list[list[str]], predicted: list[list[str]]) -> dict[str, Any]:
    """{"precision", "recall", "f1", "support", "per_type": {type: {...}}, "scorer": "seqeval"} of tag sequences,
    micro-averaged; per type, P/R/F1/support as seqeval's classification_report gives them."""
    from seqeval.metrics import classification_report
    from seqeval.scheme import IOB2

    with warnings.catch_warnings():  # numpy's empty-mean warnings when a set has no entity at all
        warnings.simplefilter("ignore", RuntimeWarning)
        report = classification_report(gold, predicted, mode="strict", scheme=IOB2, output_dict=True, zero_division=0)
    micro = report.pop("micro avg")
    for key in ("macro avg", "weighted avg"):
        report.pop(key, None)
    clean = lambda r: {"precision": float(r["precision"]), "recall": float(r["recall"]), "f1": float(r["f1-score"]), "support": int(r["support"])}
    return {**clean(micro), "per_type": {kind: clean(r) for kind, r in sorted(report.items())}, "scorer": "seqeval"}


def line(name: str, s: dict[str, Any]) -> str:
    text = f"{name} F1 {100 * s['f1']:.2f} (P {100 * s['precision']:.2f}, R {100 * s['recall']:.2f}, {s['support']} entities"
    if "seqeval" in s:
        text += f"; BRAT scorer, all gold mentions; seqeval on the flattened BIO: F1 {100 * s['seqeval']['f1']:.2f}"
    return text + ")"


def mention_scores(gold: set[tuple[str, int, int, str]], predicted: set[tuple[str, int, int, str]]) -> dict[str, Any]:
    """Exact-span, exact-type micro P/R/F1 of two sets of (document, start, end, type) mentions, as the
    PharmaCoNER and CANTEMIST scorers compute them from the .ann files; same layout as ``scores``."""

    def prf(g: set[tuple[str, int, int, str]], p: set[tuple[str, int, int, str]]) -> dict[str, float]:
        tp = len(g & p)
        precision = tp / len(p) if p else 0.0
        recall = tp / len(g) if g else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return {"precision": precision, "recall": recall, "f1": f1, "support": len(g)}

    types = sorted({m[3] for m in gold | predicted})
    per_type = {t: prf({m for m in gold if m[3] == t}, {m for m in predicted if m[3] == t}) for t in types}
    return {**prf(gold, predicted), "per_type": per_type}
