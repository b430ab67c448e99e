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
from dataclasses import replace
from pathlib import Path

from measure import REPO, case_lines, corpora, parser, publish

NCBI = REPO / "tests" / "data" / "ncbi_disease"  # the bundled excerpt; the full release under BIOFAIRSEQ_SHARED
CONFUSED = ("pt", "ca", "gl", "it", "fr")  # lid.176's neighbours of Spanish
MODES = ("both", "document", "sentence", "off")


def ncbi_sentences(folder=None):
    """NCBI-disease's sentences of 5 words or more, their tokens joined back (the project's CoNLL reader): the full
    release under BIOFAIRSEQ_SHARED, else the bundled excerpt."""
    from biofairseq.finetune.conll import read_file

    shared = os.environ.get("BIOFAIRSEQ_SHARED")
    folder = folder or (Path(shared) / "data" / "ncbi_disease" if shared else NCBI)
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


def mixture(texts, foreign, seed):
    """[(text, [(language, inserted sentence)], [corpus sentence])]: each text's paragraphs kept, every other one given
    three sentences of one foreign pool, each at a random sentence boundary of its prose."""
    from biofairseq.text.sentences import split_sentences

    rng, pools, out = random.Random(seed), sorted(foreign), []
    for i, text in enumerate(texts):
        paragraphs = [split_sentences(p) for p in text.split("\n")]
        own = [s for p in paragraphs for s in p]
        inserted = []
        if i % 2 == 0:
            lang = pools[(i // 2) % len(pools)]
            for _ in range(3):
                k, at = rng.choice(_boundaries(paragraphs))
                inserted.append((lang, rng.choice(foreign[lang])))
                paragraphs[k].insert(at, inserted[-1][1])
        out.append(("\n".join(" ".join(p) for p in paragraphs), inserted, own))
    return out


def _boundaries(paragraphs):
    """(paragraph, position) where a sentence can go in prose: after a sentence's final stop, before a capital or a
    digit, so that it stays a sentence of its own rather than running into a heading or a list item."""
    found = [(k, at) for k, p in enumerate(paragraphs) if any(s.endswith((".", "!", "?")) for s in p)
             for at in range(len(p) + 1)
             if (at == 0 or p[at - 1].endswith((".", "!", "?"))) and (at == len(p) or p[at][:1].isupper() or p[at][:1].isdigit())]
    return found or [(len(paragraphs) - 1, len(paragraphs[-1]))]


def normal(text):
    return " ".join(unicodedata.normalize("NFC", text).split())


def cleaned(mixed, lang, mode, min_prob=None):
    """Each document's kept sentences joined by spaces (a sentence that the cleaning cut in two is still found whole)
    under one --langid mode, and the CPU seconds it took."""
    from biofairseq.corpus.cleaning import CleaningConfig, DocumentCleaner

    config = CleaningConfig(langid=mode, dedup_documents=False, dedup_sentences=False)
    if min_prob is not None:
        config = replace(config, langid_sentence_min_prob=min_prob)
    cleaner, removed, out = DocumentCleaner(config, lang), Counter(), []
    start = time.process_time()
    for text, _, _ in mixed:
        out.append(" ".join(cleaner.clean(text, removed) or []))
    return out, time.process_time() - start


def score(mixed, kept, off):
    """(foreign sentences removed, their count, corpus sentences kept, of those --langid off keeps, {language: [removed,
    of]}): a sentence is kept where the cleaned document holds it whole."""
    removed = foreign = corpus_kept = corpus_off = 0
    per_language = {}
    for (_, inserted, own), text, text_off in zip(mixed, kept, off):
        for language, sentence in inserted:
            gone = normal(sentence) not in text
            removed, foreign = removed + gone, foreign + 1
            counts = per_language.setdefault(language, [0, 0])
            counts[0], counts[1] = counts[0] + gone, counts[1] + 1
        for sentence in map(normal, own):
            if sentence in text_off:
                corpus_off += 1
                corpus_kept += sentence in text
    return removed, foreign, corpus_kept, corpus_off, per_language


def row(lang, name, mode, min_prob, result, seconds):
    gone, total, kept, off, by_language = result
    return (f"| {lang} | {name} | {mode} | {min_prob} | {100 * gone / total:.1f}% ({gone}/{total}) | "
            f"{100 * kept / off:.2f}% ({off - kept} lost of {off}) | {seconds:.2f} | "
            + ", ".join(f"{l} {r}/{t}" for l, (r, t) in sorted(by_language.items())) + " |")


def main():
    from biofairseq.corpus.cleaning import CleaningConfig
    from biofairseq.text.sentences import split_sentences

    p = parser(__doc__)
    p.add_argument("--documents", type=int, default=400, help="documents in each of dev and test")
    p.add_argument("--sweep", default="0.05,0.1,0.2,0.3,0.5,0.7,0.9",
                   help="--langid-sentence-min-prob values tried on the dev half, for both and sentence")
    args = p.parse_args()
    cases = [json.loads(line)["text"] for line in case_lines(corpora()[0])]
    english = ncbi_sentences()
    n = args.documents
    foreign_es = {"en": english, **{lang: s for lang in CONFUSED if len(s := catalogue_sentences(lang)) >= 100}}
    spanish = [s for text in cases[2 * n:] for p in text.split("\n") for s in split_sentences(p) if len(s.split()) >= 5]
    sets = {
        "es": (foreign_es, cases[:2 * n]),
        "en": ({"es": spanish}, [" ".join(english[i:i + 10]) for i in range(0, 10 * 2 * n, 10)]),
    }
    default = CleaningConfig().langid_sentence_min_prob
    header = ["| CORPUS_LANG | split | --langid | min prob | foreign removed | kept | CPU s | removed, by language |",
              "|---|---|---|---|---|---|---|---|"]
    lines = ["# Language id on a mixture: foreign sentences removed, the corpus language kept", "",
             f"Command: `python benchmarks/langid_mixture.py {' '.join(sys.argv[1:])}`", "",
             f"{n} documents each in dev and test, their paragraphs kept; every other one given 3 foreign sentences at "
             f"random sentence boundaries. CORPUS_LANG=es: {corpora()[0].name} with sentences of " + ", ".join(
                 f"{lang} ({len(s):,} to draw from)" for lang, s in foreign_es.items())
             + "; CORPUS_LANG=en: NCBI-disease sentences, ten a document, with Spanish clinical-case sentences. "
             "*kept*: the corpus language's sentences that `--langid off` keeps and this run keeps too. *min prob*: "
             "`--langid-sentence-min-prob`, a sentence read by the language id is dropped where its language is less "
             "probable than this.", "", f"## At the default ({default})", "", *header]
    sweep, results = ["", "## The threshold on the dev half", "", *header], {}
    for lang, (foreign, texts) in sets.items():
        for name, part in (("dev", texts[:n]), ("test", texts[n:2 * n])):
            mixed = mixture(part, foreign, seed=len(name))
            off, _ = cleaned(mixed, lang, "off")  # what the other filters keep
            for mode in MODES:
                probs = [float(v) for v in args.sweep.split(",")] if name == "dev" and mode in ("both", "sentence") else []
                for min_prob in [default, *(v for v in probs if v != default)]:
                    kept, seconds = cleaned(mixed, lang, mode, min_prob)
                    result = score(mixed, kept, off)
                    shown = min_prob if mode in ("both", "sentence") else "-"
                    results[f"{lang}/{name}/{mode}/{min_prob}"] = {
                        "removed": result[0], "foreign": result[1], "kept": result[2], "off_kept": result[3],
                        "cpu_s": round(seconds, 3), "by_language": result[4]}
                    if min_prob == default:
                        lines.append(row(lang, name, mode, shown, result, seconds))
                        print(lines[-1], flush=True)
                    if min_prob in probs:
                        sweep.append(row(lang, name, mode, shown, result, seconds))
    lines += sweep
    lines += ["", "The goal: at least 95% of the foreign sentences removed and at least 99.7% of the corpus language's "
              "kept.", "", "Per run: " + json.dumps(results)]
    publish(lines, args.output)


if __name__ == "__main__":
    main()
