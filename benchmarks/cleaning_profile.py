"""Where the cleaning of a shard spends its time, stage by stage, in one process.

process_shard (what each clean_corpus.py worker runs) cleans the clinical cases (the bundled sample, the full release
under $BIOFAIRSEQ_SHARED, or PATH) twice: once as it is, for its time and throughput, then with a timer around each
stage, for the table (the two must write the same shard, and that is checked). A stage is a function or regex that
the cleaning calls, found by name in biofairseq.corpus.cleaning and pipeline: the names of the code before its
speed-up and after (those absent are left out), so that the same script measures both. A stage's seconds leave out
those of the timed stages it calls; the language id of a document is its first fastText prediction, the others are its
sentences'. What no timer covers is the rest of clean() and of process_shard: the loops, per-sentence Python, inline
checks. The timers cost a little, as the untimed and timed totals show.

It measures the code of the tree it is in (the old code: run a copy of this file placed in a checkout of it):

    BIOFAIRSEQ_SHARED=/path/to/shared .venv/bin/python benchmarks/cleaning_profile.py \
        [--output benchmarks/results/cleaning_profile.md --title TITLE]
"""

import argparse
import functools
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from measure import REPO, corpora

sys.path.insert(0, str(REPO))

from biofairseq.corpus import cleaning, dedup, pipeline  # noqa: E402
from biofairseq.corpus.cleaning import CleaningConfig  # noqa: E402
from biofairseq.corpus.sources import discover, open_compressed, plan_shards  # noqa: E402
from biofairseq.text.tables import markdown_table  # noqa: E402


class Timers:
    """Exclusive seconds and calls per stage: a timed call's time less that of the timed calls inside it."""

    def __init__(self):
        self.seconds, self.calls, self.inner = Counter(), Counter(), [0.0]

    def _account(self, stage, start):
        elapsed = time.perf_counter() - start
        self.seconds[stage] += elapsed - self.inner.pop()
        self.inner[-1] += elapsed
        self.calls[stage] += 1

    def wrap(self, stage, function):
        @functools.wraps(function)
        def timed(*args, **kwargs):
            self.inner.append(0.0)
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self._account(stage, start)

        return timed

    def wrap_generator(self, stage, function):
        def timed(*args, **kwargs):
            items = function(*args, **kwargs)
            while True:
                self.inner.append(0.0)
                start = time.perf_counter()
                try:
                    item = next(items)
                except StopIteration:
                    return
                finally:
                    self._account(stage, start)
                yield item

        return timed


class Proxy:
    """An object whose named methods are timed, the rest passed through (a compiled regex, a module, a model)."""

    def __init__(self, target, timers, methods):
        self._target = target
        for name, stage in methods.items():
            if hasattr(target, name):
                setattr(self, name, timers.wrap(stage, getattr(target, name)))

    def __getattr__(self, name):
        return getattr(self._target, name)


class TimedFile(Proxy):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return self._target.__exit__(*exc)


# (module, attribute, stage) of module-level regexes and functions, before and after the speed-up
MODULE_STAGES = [
    (pipeline, "read_documents", "read and parse the input (JSON lines)"),
    (cleaning, "_NEEDS_FTFY", "Unicode check: does ftfy need to run"),
    (cleaning, "_needs_ftfy", "Unicode check: does ftfy need to run"),
    (cleaning, "_fix_text", "ftfy (fix_text)"),
    (cleaning, "split_sentences", "sentence splitting"),
    (cleaning, "split_sentence_spans", "sentence splitting"),
    (cleaning, "_ASCII_SPACES", "whitespace normalisation (regex)"),
    (cleaning, "_NON_LETTERS", "filter: letter ratio"),
    (cleaning, "_char_weights", "filters: per-document character classes (numpy)"),
    (cleaning, "_char_counts", "filter: letter ratio (per-document counts)"),
    (cleaning, "_may_repeat", "filter: repeated characters (per-document check)"),
    (cleaning, "_BOILERPLATE", "filter: boilerplate"),
    (cleaning, "_may_be_boilerplate", "filter: boilerplate (per-document check)"),
    (cleaning, "_EMAIL", "filter: e-mail"),
]
REGEX_METHODS = ("search", "sub", "match", "finditer")


def instrument(timers, cleaner):
    """Puts the timers in place; returns a function that takes them away."""
    undo = []

    def patch(owner, name, value):
        undo.append((owner, name, getattr(owner, name, None)))
        setattr(owner, name, value)

    for module, name, stage in MODULE_STAGES:
        if not hasattr(module, name):
            continue
        target = getattr(module, name)
        if name == "read_documents":
            patch(module, name, timers.wrap_generator(stage, target))
        elif callable(target) and not hasattr(target, "pattern"):
            patch(module, name, timers.wrap(stage, target))
        else:
            patch(module, name, Proxy(target, timers, dict.fromkeys(REGEX_METHODS, stage)))
    import ftfy

    patch(ftfy, "fix_text", timers.wrap("ftfy (fix_text)", ftfy.fix_text))
    patch(cleaning, "unicodedata", Proxy(cleaning.unicodedata, timers, {"normalize": "NFC (unicodedata.normalize)"}))
    if getattr(cleaner, "repeated", None) is not None:
        stages = dict.fromkeys(REGEX_METHODS, "filter: repeated characters")
        patch(cleaner, "repeated", Proxy(cleaner.repeated, timers, stages))
    # language id: the first prediction of a document is the document's, the others its sentences'
    if cleaner.lid is not None:
        state = {"document": False}

        def predictor(function):
            document, sentence = (timers.wrap(f"language id: {what}", function) for what in ("document", "sentences"))

            def predict(*args, **kwargs):
                timed = document if state["document"] else sentence
                state["document"] = False
                return timed(*args, **kwargs)

            return predict

        lid = Proxy(cleaner.lid, timers, {})
        lid.predict = predictor(cleaner.lid.predict)
        lid.f = Proxy(cleaner.lid.f, timers, {})
        lid.f.predict = predictor(cleaner.lid.f.predict)
        lid.f.multilinePredict = predictor(cleaner.lid.f.multilinePredict)
        patch(cleaner, "lid", lid)
        clean = cleaner.clean

        def clean_document(*args, **kwargs):
            state["document"] = True
            return clean(*args, **kwargs)

        patch(cleaner, "clean", timers.wrap("clean(): the rest (Python between the stages)", clean_document))
    else:
        patch(cleaner, "clean", timers.wrap("clean(): the rest (Python between the stages)", cleaner.clean))
    if getattr(cleaner, "gate", None) is not None:
        patch(cleaner, "gate", Proxy(cleaner.gate, timers, {"flagged_spans": "language gate (function words, letters)"}))
    patch(dedup.ShardHashes, "add", timers.wrap("hashing (ShardHashes.add: xxhash)", dedup.ShardHashes.add))
    patch(pipeline, "open", lambda *a, **k: TimedFile(open(*a, **k), timers, {"write": "writing the shard"}))

    def remove():
        for owner, name, value in reversed(undo):
            if owner is pipeline and name == "open":
                del pipeline.open
            else:
                setattr(owner, name, value)

    return remove


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", nargs="?", default=corpora()[0], help="JSON lines (default: the clinical cases)")
    p.add_argument("--lang", default="es")
    p.add_argument("--output", help="append the table to this Markdown file")
    p.add_argument("--title", default="cleaning profile", help="the section's title in --output")
    args = p.parse_args()

    config = CleaningConfig()
    pieces, _ = discover(str(args.path), "blank-line")
    (shard,) = plan_shards("profile", pieces, 1 << 40)
    size = 0  # raw (uncompressed) bytes
    for path in {piece.path for piece in pieces}:
        with open_compressed(path) as f:
            size += sum(map(len, f))
    start = time.perf_counter()
    cleaner = pipeline._cleaner(config, args.lang)  # the model loads once per worker, outside process_shard's time
    load = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        pipeline.process_shard(shard, config, args.lang, "text", False, f"{tmp}/plain")
        plain = time.perf_counter() - start
        timers = Timers()
        remove = instrument(timers, cleaner)
        try:
            start = time.perf_counter()
            pipeline.process_shard(shard, config, args.lang, "text", False, f"{tmp}/timed")
            timed = time.perf_counter() - start
        finally:
            remove()
        for suffix in (".txt", ".json"):
            name = f"{shard.name}{suffix}"
            if Path(tmp, "plain", name).read_bytes() != Path(tmp, "timed", name).read_bytes():
                sys.exit(f"the timed run wrote another {name} than the plain run")
        counts = json.loads(Path(tmp, "plain", f"{shard.name}.json").read_text())["counts"]
    timers.seconds["process_shard: the rest (token count, loop)"] = timed - sum(timers.seconds.values())
    timers.calls["process_shard: the rest (token count, loop)"] = 1
    rows = [[stage, f"{s:.2f}", f"{100 * s / timed:.1f} %", f"{timers.calls[stage]:,}"]
            for stage, s in sorted(timers.seconds.items(), key=lambda kv: -kv[1])]
    rows.append(["total (timed run)", f"{timed:.2f}", "100.0 %", ""])
    table = markdown_table(["stage", "seconds", "share", "calls"], rows)
    summary = (f"{Path(args.path).name}: {size / 1e6:.1f} MB raw, {counts['docs_in']:,} documents, "
               f"{counts['sentences_in']:,} sentences; process_shard in one process: {plain:.2f} s "
               f"({size / 1e6 / plain:.2f} MB/s) untimed, {timed:.2f} s timed; model load {load:.2f} s "
               "(once per worker)")
    print(summary)
    print(table)
    if args.output:
        with open(args.output, "a", encoding="utf-8") as f:
            f.write(f"\n## {args.title}\n\n{summary}.\n\n{table}\n")


if __name__ == "__main__":
    main()
