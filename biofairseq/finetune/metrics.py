"""Entity-level strict precision, recall and F1 (seqeval, IOB2), overall and per type."""

import warnings


def scores(gold, predicted):
    """{"precision", "recall", "f1", "support", "per_type": {type: {...}}} of tag sequences, micro-averaged."""
    from seqeval.metrics import classification_report
    from seqeval.scheme import IOB2

    with warnings.catch_warnings():  # numpy's empty-mean warnings when a set has no entity at all
        warnings.simplefilter("ignore", RuntimeWarning)
        report = classification_report(gold, predicted, mode="strict", scheme=IOB2, output_dict=True, zero_division=0)
    micro = report.pop("micro avg")
    for key in ("macro avg", "weighted avg"):
        report.pop(key, None)
    clean = lambda r: {"precision": float(r["precision"]), "recall": float(r["recall"]), "f1": float(r["f1-score"]), "support": int(r["support"])}
    return {**clean(micro), "per_type": {kind: clean(r) for kind, r in sorted(report.items())}}


def line(name, s):
    return f"{name} F1 {100 * s['f1']:.2f} (P {100 * s['precision']:.2f}, R {100 * s['recall']:.2f}, {s['support']} entities)"
