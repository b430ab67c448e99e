"""The cleaning gives, byte for byte, what it gave before it was made faster (commit d1f4214, 2026-11-25).

tests/data/cleaning_reference.json holds what that code made of the bundled sample (examples/data, 1,000 clinical
cases) and of tests/data/cleaning_adversarial.jsonl, synthetic documents written for this test that reach every branch
of the cleaning (mojibake, HTML entities, other languages, boilerplate, repeated characters, numbers, abbreviations,
unusual whitespace and line breaks, NFD text, repeats). Regenerate it only on purpose, when the output is meant to
change: ``python tests/test_cleaning_identical.py --record`` (it runs the code found first on the path).

The other tests check, each on its own, that the shortcuts taken for speed see what the slow checks they stand for
see (ftfy's per line, the boilerplate keys under re.IGNORECASE, the per-document character counts).
"""

import hashlib
import json
import random
import re
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import inprocess
from biofairseq.dev.samples import REPO, clinical_lines

DATA = Path(__file__).resolve().parent / "data"
REFERENCE = DATA / "cleaning_reference.json"
ADVERSARIAL = DATA / "cleaning_adversarial.jsonl"
SAMPLE = Path("examples") / "data" / "clinical_cases.jsonl.gz"

# cleaning settings other than the defaults, on the adversarial documents (every filter, each langid level, no split)
CONFIGS = {
    "default": {},
    "lines": {"split_sentences": False, "langid": "sentence", "dedup_sentence_min_words": 3},
    "document": {"langid": "document", "min_letter_ratio": 0.6, "max_char_repeat": 4, "min_words": 3, "max_words": 20},
    "off": {"langid": "off", "boilerplate": False, "nfc": False, "min_letter_ratio": 0.0, "max_char_repeat": 0,
            "min_words": 0, "max_words": 0, "near_duplicates": 0.8},
}


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def clean_cli(out):
    """What clean_corpus.py makes of the sample and the adversarial documents, as two sources: the digests of
    train.txt and valid.txt, and stats.json as written (its keys in their order), less its fingerprint (paths,
    times)."""
    inprocess.run("python", REPO / "preprocess" / "clean_corpus.py", "--source", f"sample={REPO / SAMPLE}",
                  "--source", f"adversarial={ADVERSARIAL}", "--output-dir", out, "--lang", "es", "--valid-docs", 100,
                  "--workers", 1, "--quiet")
    stats = json.loads((out / "stats.json").read_text())
    return {
        "train.txt": sha256((out / "train.txt").read_bytes()), "valid.txt": sha256((out / "valid.txt").read_bytes()),
        "stats": json.dumps({k: v for k, v in stats.items() if k != "fingerprint"}),
    }


def clean_shards(out):
    """process_shard's output (text, counts in their order, hashes) on the adversarial documents, under each of
    CONFIGS."""
    from biofairseq.corpus.cleaning import CleaningConfig
    from biofairseq.corpus.pipeline import process_shard
    from biofairseq.corpus.sources import discover, plan_shards

    pieces, errors = discover(str(ADVERSARIAL), "blank-line")
    assert not errors
    (shard,) = plan_shards("adversarial", pieces, 1 << 30)
    results = {}
    for name, overrides in CONFIGS.items():
        folder = out / name
        process_shard(shard, replace(CleaningConfig(), **overrides), "es", "text", True, str(folder))
        with np.load(folder / f"{shard.name}.hashes.npz") as h:
            hashes = {key: sha256(np.ascontiguousarray(h[key]).tobytes()) for key in sorted(h.files)}
        results[name] = {
            "text": (folder / f"{shard.name}.txt").read_text(encoding="utf-8").split("\n"),
            "counts": json.dumps(json.loads((folder / f"{shard.name}.json").read_text())["counts"]),
            "hashes": hashes,
        }
    return results


@pytest.fixture(scope="module")
def reference():
    return json.loads(REFERENCE.read_text(encoding="utf-8"))


def adversarial_texts():
    return [json.loads(line)["text"] for line in ADVERSARIAL.read_text().splitlines()]


@pytest.mark.fast
def test_adversarial_documents_clean_as_before(reference, tmp_path):
    shards = clean_shards(tmp_path)
    for name in CONFIGS:
        expected, got = reference["shards"][name], shards[name]
        assert got["text"] == expected["text"], name  # a readable difference: the lines
        assert got["counts"] == expected["counts"], name
        assert got["hashes"] == expected["hashes"], name


def test_sample_and_adversarial_corpus_clean_as_before(reference, tmp_path):
    got, expected = clean_cli(tmp_path / "out"), reference["cli"]
    assert json.loads(got["stats"]) == json.loads(expected["stats"])  # a readable difference first
    assert got["stats"] == expected["stats"]  # then the order of the keys
    assert got["train.txt"] == expected["train.txt"]
    assert got["valid.txt"] == expected["valid.txt"]


def fuzz(alphabet, count, seed=1, longest=12):
    rng = random.Random(seed)
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, longest))) for _ in range(count)]


@pytest.mark.fast
def test_fast_checks_see_what_the_regexes_see():
    from biofairseq.corpus.cleaning import (_NEEDS_FTFY, _NON_LETTERS, _SAFE_EXTRA, _char_counts, _char_weights,
                                            _may_repeat, _needs_ftfy)
    from biofairseq.text.sentences import split_sentence_spans

    texts = [json.loads(line)["text"] for line in clinical_lines(0, 300)] + adversarial_texts()
    symbols = _SAFE_EXTRA + "ÀÃÂß&<>\n\t ªºµ¼\u0301\u2028\x85é€Ñ—a.,1"
    for text in texts + fuzz(symbols, 20000):
        assert _needs_ftfy(text) == bool(_NEEDS_FTFY.search(text)), repr(text)
    repeats = {times: re.compile(r"(.)\1{%d}" % (times - 1)) for times in (1, 2, 3, 4, 10)}
    for text in texts + fuzz("aab.\n\t \u00a0ñ😀²_", 3000, longest=30):
        spans = split_sentence_spans(text)
        codes, weights = _char_weights(text)
        letters, solid = _char_counts(weights, [b for span in spans for b in span])
        may = {times: _may_repeat(codes, weights, times) for times in repeats}
        for (start, end), n_letters, n_solid in zip(spans, letters, solid):
            sentence = " ".join(text[start:end].split())
            assert n_letters == len(_NON_LETTERS.sub("", sentence)), repr(sentence)
            assert n_solid == len(sentence) - sentence.count(" "), repr(sentence)
            for times, repeated in repeats.items():
                assert may[times] or not repeated.search(sentence), (times, text)


@pytest.mark.fast
def test_boilerplate_keys_see_what_ignorecase_matches():
    """A key spelt with any of the characters that re.IGNORECASE takes for its own (of all code points: "İ", "ı", "ſ",
    the Kelvin sign...) is still found; so is any text that _BOILERPLATE matches."""
    from biofairseq.corpus.cleaning import _BOILERPLATE, _BOILERPLATE_KEYS, _may_be_boilerplate

    everything = "".join(map(chr, range(0x110000)))
    for char in sorted(set("".join(_BOILERPLATE_KEYS))):
        alike = {m.group() for m in re.finditer(re.escape(char), everything, re.IGNORECASE)}
        assert char in alike
        for key in _BOILERPLATE_KEYS:
            if char in key:
                for other in alike:
                    assert _may_be_boilerplate(f"Texto {key.replace(char, other)} aquí."), (key, hex(ord(other)))
    tricky = ["COO\u212aIES", "copyr\u0130ght", "Lorem ip\u017fum", "cl\u0131ck here", "haga\tclic", "WWW.X.ES",
              "(https://a.b)", "©", "Pulse AQUÍ", "no boilerplate", "cookiebar", "wwwx", "http"]
    for text in tricky + fuzz("coOKkie\u212a ©hwtps:/.\u0131\u0130\u017f\u0307", 20000):
        if _BOILERPLATE.search(text):
            assert _may_be_boilerplate(text), repr(text)


@pytest.mark.fast
def test_ftfy_lines_left_alone_are_those_ftfy_leaves_alone():
    import ftfy
    from ftfy.badness import is_bad

    from biofairseq.corpus.cleaning import _SAFE_CHARS, _fix_text, _ftfy_config, _ftfy_segment_gate, _needs_ftfy

    config = _ftfy_config()
    gate = _ftfy_segment_gate(config)
    assert gate is not None  # the pinned ftfy is one the shortcut knows
    safe = sorted(_SAFE_CHARS)
    accented = [c for c in safe if ord(c) > 127] + list(" \n\taz.,")
    for text in fuzz(accented, 20000, longest=8) + fuzz(safe, 5000, longest=8):
        assert bool(gate.search(text)) == is_bad(text), repr(text)
    texts = [json.loads(line)["text"] for line in clinical_lines(0, 1000)] + adversarial_texts()
    texts = [t for t in texts if _needs_ftfy(t)] + [
        "Mezcla de líneas.\nLa troponina fue normal â€“ sin cambios.\nRefiere dolor torÃ¡cico.",
        "Uno &amp; dos.\nGlucemia <140 mg/dl.\nTres &amp; cuatro y d&iacute;a.",
        "Sólo una línea sin salto final con Ã³",
    ]
    assert len(texts) > 100
    for text in texts:
        assert _fix_text(text, config, gate) == ftfy.fix_text(text, config), repr(text[:200])


if __name__ == "__main__" and sys.argv[1:] == ["--record"]:
    import tempfile

    import biofairseq

    with tempfile.TemporaryDirectory() as tmp:
        made = {"cli": clean_cli(Path(tmp) / "out"), "shards": clean_shards(Path(tmp))}
    REFERENCE.write_text(json.dumps(made, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{REFERENCE}: recorded with {biofairseq.__file__}")
