"""Rebuilds the bundled excerpts of public corpora from their full releases.

    python examples/make_sample.py --shared PATH [--docs 1000] [--ner 100,40,40] [--seed 1]

PATH holds the full releases as ``data/spanish_clinical_text/clinical_cases.jsonl``, ``data/pharmaconer/`` (BRAT,
train/valid/test) and ``data/ncbi_disease/`` (CoNLL). Written:

- ``examples/data/``, the sample ``make demo`` runs on: a seeded random draw of whole documents, copied unchanged,
  of clinical case reports (JSON lines, gzip) for pretraining and PharmaCoNER documents (BRAT .txt + .ann) for NER;
- ``tests/data/``, what the tests need beyond it: the first sentences of each NCBI-disease split (English, CoNLL),
  and the one PharmaCoNER document whose official annotations disagree with its text.

The attribution of both is in NOTICE.
"""

import argparse
import gzip
import random
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
NCBI_SENTENCES = {"train": 300, "devel": 300, "test": 200}
# The PharmaCoNER training document with 5 entities whose offsets are shifted from their mention text.
MISALIGNED = "S0211-69952015000200015-1"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shared", type=Path, required=True, help="the folder holding data/ with the full releases")
    parser.add_argument("--output-dir", type=Path, default=HERE / "data", help="the demo's sample")
    parser.add_argument("--tests-dir", type=Path, default=REPO / "tests" / "data", help="the tests' extra excerpts")
    parser.add_argument("--docs", type=int, default=1000, help="clinical case reports for pretraining")
    parser.add_argument("--ner", default="100,40,40", help="PharmaCoNER documents drawn from train,valid,test")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    data = args.shared / "data"
    if not (data / "spanish_clinical_text" / "clinical_cases.jsonl").is_file():
        parser.error(f"{data / 'spanish_clinical_text' / 'clinical_cases.jsonl'}: missing; --shared names the folder holding data/")
    rng = random.Random(args.seed)
    out = args.output_dir
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)

    with open(data / "spanish_clinical_text" / "clinical_cases.jsonl", encoding="utf-8", newline="\n") as f:
        lines = f.readlines()  # not str.splitlines(): the texts hold U+2028 and other line breaks
    picked = sorted(rng.sample(range(len(lines)), args.docs))
    # mtime=0: the same draw gives the same bytes, so the file changes only when the sample does.
    with open(out / "clinical_cases.jsonl.gz", "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        f.write("".join(lines[i] for i in picked).encode("utf-8"))

    for split, count in zip(("train", "valid", "test"), map(int, args.ner.split(","))):
        texts = sorted((data / "pharmaconer" / split).glob("*.txt"))
        (out / "pharmaconer" / split).mkdir(parents=True)
        for txt in sorted(rng.sample(texts, count)):
            for path in (txt, txt.with_suffix(".ann")):
                shutil.copy(path, out / "pharmaconer" / split / path.name)
    shutil.copy(data / "pharmaconer" / "LICENSE", out / "pharmaconer" / "LICENSE")
    print(f"{out}: {args.docs} clinical cases, PharmaCoNER {args.ner} documents")

    tests = args.tests_dir
    for name in ("ncbi_disease", "pharmaconer_misaligned"):
        shutil.rmtree(tests / name, ignore_errors=True)
        (tests / name).mkdir(parents=True)
    for split, count in NCBI_SENTENCES.items():
        sentences = (data / "ncbi_disease" / f"{split}.tsv").read_text(encoding="utf-8").split("\n\n")[:count]
        (tests / "ncbi_disease" / f"{split}.tsv").write_text("\n\n".join(sentences) + "\n\n", encoding="utf-8")
    for suffix in (".txt", ".ann"):
        shutil.copy(data / "pharmaconer" / "train" / f"{MISALIGNED}{suffix}", tests / "pharmaconer_misaligned")
    print(f"{tests}: NCBI-disease {', '.join(f'{n} {s}' for s, n in NCBI_SENTENCES.items())} sentences; PharmaCoNER {MISALIGNED}")


if __name__ == "__main__":
    main()
