"""ELECTRA pilots side by side: one row per run folder of recipes/bioelectra.sh, from the files its stages wrote.

    python benchmarks/electra_variants.py "tied=runs/pilot_bioelectra" "GDES=runs/pilot_gdes" [--ner pharmaconer]

Prints, as Markdown, the discriminator's validation curve at a few updates (loss over the trivial loss, share of
replaced tokens found, AUC, mean token cosine), where the generator ended, and the NER sweep's dev and test F1
(mean ± std over its runs), so that variants are chosen on dev and their test read once.
"""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from biofairseq.finetune import sweep_report  # noqa: E402
from biofairseq.text.tables import markdown_table  # noqa: E402

AT = (500, 1000, 2000, 3000)


def validations(run_dir):
    with open(Path(run_dir) / "report.json") as f:
        pretraining = json.load(f)["pretraining"]
    return pretraining, {int(v["update"]): v for v in pretraining["validations"]}


def nearest(curve, update):
    """The validation at this update, or the last one before it (validation also runs at each pass's end)."""
    before = [u for u in curve if u <= update]
    return curve[max(before)] if before else None


def discriminator_cells(v):
    if v is None:
        return "-"
    return (f"{v['disc_loss'] / v['disc_trivial']:.3f} / {v['disc_acc_replaced']:.1f}% / {v['disc_auc']:.3f} / "
            f"{v['disc_cosine']:.2f}")


def ner_cells(run_dir, data_set):
    sweeps = sorted((Path(run_dir) / "ner" / data_set).glob("model=*"))
    sweeps = [s for s in sweeps if s.name != "model=random_init"]
    if not sweeps:
        return "-", "-"
    _, summaries = sweep_report.collect(sweeps[:1])
    s = summaries[0]
    pct = lambda stat: f"{100 * stat['mean']:.2f} ± {100 * stat['std']:.2f}"
    return f"{pct(s['dev_f1'])} ({s['runs']})", pct(s["f1"]) if s["split"] == "test" else "-"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", metavar="NAME=RUN_DIR")
    parser.add_argument("--ner", default="pharmaconer", help="the NER data set's name in NER_DATA")
    args = parser.parse_args(argv)
    header = ["variant", "updates", *(f"update {u}: loss/trivial, found, AUC, cosine" for u in AT),
              "generator at the end: ppl, acc.", "NER dev F1 (runs)", "NER test F1"]
    rows = []
    for item in args.runs:
        name, sep, run_dir = item.partition("=")
        if not sep or not (Path(run_dir) / "report.json").is_file():
            parser.error(f"{item}: give NAME=RUN_DIR, NAME without '=' and RUN_DIR a finished recipe run (its report.json)")
        pretraining, curve = validations(run_dir)
        last = curve[max(curve)]
        rows.append([name, f"{int(pretraining['updates']):,}", *(discriminator_cells(nearest(curve, u)) for u in AT),
                     f"{last['gen_ppl']:.1f}, {last['gen_acc']:.2f}%", *ner_cells(run_dir, args.ner)])
    print(markdown_table(header, rows))


if __name__ == "__main__":
    main()
