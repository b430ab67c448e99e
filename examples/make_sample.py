"""Rebuilds the bundled sample in examples/data/ from the full corpora in ../shared/data.

    python examples/make_sample.py [--shared ../shared] [--docs 1000] [--ner 100,40,40] [--seed 1]

A seeded random draw of whole documents, copied unchanged: clinical case reports (JSON lines, gzip) for
pretraining, and PharmaCoNER documents (BRAT .txt + .ann) for NER. The full corpora are described in
../shared/data/README.md; the attribution is in examples/NOTICE.
"""

import argparse
import gzip
import random
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shared", type=Path, default=HERE.parents[1] / "shared")
    parser.add_argument("--output-dir", type=Path, default=HERE / "data")
    parser.add_argument("--docs", type=int, default=1000, help="clinical case reports for pretraining")
    parser.add_argument("--ner", default="100,40,40", help="PharmaCoNER documents drawn from train,valid,test")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    data = args.shared / "data"
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


if __name__ == "__main__":
    main()
