"""How much foreign text the cleaning's language id removes, and how much of the corpus language it keeps.

A mixture built from the data at hand: the clinical cases (the full release under BIOFAIRSEQ_SHARED, else the
bundled sample), half of them given three foreign sentences each at random places between their sentences:
NCBI-disease's English sentences in every other one, and where this machine has gettext catalogues
(/usr/share/locale), sentences of the languages lid.176 confuses with Spanish most (Portuguese, Catalan, Galician,
Italian, French) in the rest. The other way round for CORPUS_LANG=en: documents of ten NCBI-disease sentences, half
given three Spanish clinical-case sentences. Two splits of documents: dev (for choosing settings) and test.

Each --langid mode of the cleaning (biofairseq.corpus.cleaning.DocumentCleaner, every other filter as by default)
cleans every document; a foreign sentence is removed when no kept sentence holds it, and the corpus language's
sentences kept are counted against --langid off, which keeps what the other filters keep.

    python benchmarks/langid_mixture.py --output benchmarks/results/langid_mixture.md
"""

import gettext
import glob
import json
import os
import random
import sys
import time
import unicodedata
from collections import Counter
from pathlib import Path

from measure import REPO, case_lines, corpora, parser, publish

NCBI = REPO / "tests" / "data" / "ncbi_disease"  # the bundled excerpt; the full release under BIOFAIRSEQ_SHARED
CONFUSED = ("pt", "ca", "gl", "it", "fr")  # lid.176's neighbours of Spanish
MODES = ("both", "document", "sentence", "off")


def ncbi_sentences():
    """NCBI-disease's sentences of 5 words or more, their tokens joined back (the project's CoNLL reader)."""
    from biofairseq.finetune.conll import read_file

    shared = os.environ.get("BIOFAIRSEQ_SHARED")
    folder = Path(shared) / "data" / "ncbi_disease" if shared else NCBI
    sentences = [" ".join(tokens) for path in sorted(folder.glob("*.tsv")) for tokens, _ in read_file(path)]
    return [s.replace(" ,", ",").replace(" .", ".").replace("( ", "(").replace(" )", ")")
            for s in sentences if len(s.split()) >= 5]


def catalogue_sentences(lang):
    """Whole sentences (5-40 words, no placeholders) from the gettext catalogues of one language, if any."""
    found = set()
    for path in glob.glob(f"/usr/share/locale/{lang}/LC_MESSAGES/*.mo"):
        try:
            with open(path, "rb") as f:
                catalog = gettext.GNUTranslations(f)._catalog
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        for text in catalog.values():
            if isinstance(text, str) and 5 <= len(text.split()) <= 40 and not any(c in text for c in "%{}_\n\\<>|"):
                text = text.strip()  # a sentence of its own where it is put: a capital first, a stop last
                found.add(text[0].upper() + text[1:] + ("" if text[-1] in ".!?" else "."))
    return sorted(found)


def split(text):
    from biofairseq.text.sentences import split_sentences

    return [s for paragraph in text.split("\n") for s in split_sentences(paragraph)]


def mixture(documents, foreign, seed):
    """[(text, [(language, inserted sentence)])]: every other document with three sentences of one foreign pool."""
    rng, pools, out = random.Random(seed), sorted(foreign), []
    for i, sentences in enumerate(documents):
        sentences, inserted = list(sentences), []
        if i % 2 == 0:
            lang = pools[(i // 2) % len(pools)]
            for _ in range(3):
                inserted.append((lang, rng.choice(foreign[lang])))
                sentences.insert(rng.randrange(len(sentences) + 1), inserted[-1][1])
        out.append((" ".join(sentences), inserted))
    return out


def normal(text):
    return " ".join(unicodedata.normalize("NFC", text).split())


def score(mixed, lang, mode):
    """(foreign sentences removed, their count, corpus sentences kept, CPU seconds, {language: [removed, of]}) under
    one --langid mode."""
    from biofairseq.corpus.cleaning import CleaningConfig, DocumentCleaner

    config = CleaningConfig(langid=mode, dedup_documents=False, dedup_sentences=False)
    cleaner, removed = DocumentCleaner(config, lang), Counter()
    foreign_left = foreign = corpus_kept = 0
    per_language = {}
    start = time.process_time()
    for text, inserted in mixed:
        kept = cleaner.clean(text, removed) or []
        joined = "\n".join(kept)
        foreign += len(inserted)
        for language, sentence in inserted:
            left = normal(sentence) in joined
            foreign_left += left
            counts = per_language.setdefault(language, [0, 0])
            counts[0], counts[1] = counts[0] + (not left), counts[1] + 1
        corpus_kept += sum(not any(normal(s) in k for _, s in inserted) for k in kept)
    return foreign - foreign_left, foreign, corpus_kept, time.process_time() - start, per_language


def main():
    p = parser(__doc__)
    p.add_argument("--documents", type=int, default=400, help="documents in each of dev and test")
    args = p.parse_args()
    cases = [json.loads(line)["text"] for line in case_lines(corpora()[0])]
    english = ncbi_sentences()
    n = args.documents
    foreign_es = {"en": english, **{lang: s for lang in CONFUSED if len(s := catalogue_sentences(lang)) >= 100}}
    spanish = [s for text in cases[2 * n:] for s in split(text) if len(s.split()) >= 5]
    sets = {
        "es": (foreign_es, [split(text) for text in cases[:2 * n]]),
        "en": ({"es": spanish}, [english[i:i + 10] for i in range(0, 10 * 2 * n, 10)]),
    }
    lines = ["# Language id on a mixture: foreign sentences removed, the corpus language kept", "",
             f"Command: `python benchmarks/langid_mixture.py {' '.join(sys.argv[1:])}`", "",
             f"{n} documents each in dev and test; half of them given 3 foreign sentences. "
             f"CORPUS_LANG=es: {corpora()[0].name} with sentences of " + ", ".join(
                 f"{lang} ({len(s):,} to draw from)" for lang, s in foreign_es.items())
             + "; CORPUS_LANG=en: NCBI-disease sentences, ten a document, with Spanish clinical-case sentences. "
             "*kept*: the corpus language's sentences kept, against `--langid off`.", "",
             "| CORPUS_LANG | split | --langid | foreign removed | kept | CPU s | removed, by language |",
             "|---|---|---|---|---|---|---|"]
    results = {}
    for lang, (foreign, documents) in sets.items():
        for name, part in (("dev", documents[:n]), ("test", documents[n:2 * n])):
            mixed = mixture(part, foreign, seed=len(name))
            off = score(mixed, lang, "off")[2]  # what the other filters keep
            for mode in MODES:
                gone, total, kept, seconds, by_language = score(mixed, lang, mode)
                results[f"{lang}/{name}/{mode}"] = {"removed": gone, "foreign": total, "kept": kept, "off_kept": off,
                                                    "cpu_s": seconds, "by_language": by_language}
                lines.append(f"| {lang} | {name} | {mode} | {100 * gone / total:.1f}% ({gone}/{total}) | "
                             f"{100 * kept / off:.2f}% ({off - kept} lost of {off}) | {seconds:.2f} | "
                             + ", ".join(f"{l} {r}/{t}" for l, (r, t) in sorted(by_language.items())) + " |")
                print(lines[-1], flush=True)
    lines += ["", "The goal: at least 95% of the foreign sentences removed and at least 99.7% of the corpus language's "
              "kept.", "", "Per run: " + json.dumps(results)]
    publish(lines, args.output)


if __name__ == "__main__":
    main()
