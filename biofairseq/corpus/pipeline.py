"""Raw sources -> cleaned, deduplicated train.txt / valid.txt, in resumable shards.

The stages, in order (_clean): plan the shards (decompressing large compressed files as tasks); clean each shard
(process_shard), which writes it atomically with the 64-bit hashes of its documents and sentences; find the repeats,
per source and then across sources, by sorting those hashes in buckets (biofairseq.corpus.dedup); filter each shard
of its repeats (filter_shard); write train.txt and valid.txt (write_splits), the valid documents being those of
smallest seeded hash, a choice that more sources do not redo. Every stage but the plan is a set of independent
jobs (Stages: local processes, or job arrays under --launcher), each written atomically, so that a restart redoes
only what has no result yet; the submitting host reads only the jobs' small results, never the corpus.
"""

import json
import os
import shutil
import sys
import time
from collections import Counter
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

import numpy as np
import xxhash

from biofairseq.atomic import write_text
from biofairseq.corpus.cleaning import SENTENCE_FILTERS, CleaningConfig, DocumentCleaner
from biofairseq.corpus.dedup import Repeats, ShardHashes, find_repeats
from biofairseq.corpus.options import CorpusOptions
from biofairseq.corpus.processes import map_jobs
from biofairseq.corpus.sources import (InputError, Shard, discover, needs_splitting, open_compressed, plan_shards,
                                      read_documents, split_compressed, walk)
from biofairseq.text.documents import is_blank
from biofairseq.text.tables import markdown_table

_Job = TypeVar("_Job")
_Result = TypeVar("_Result")

FORMAT_VERSION = 3  # 2: each cleaned shard has its hashes beside it; 3: and their counts in its .json
_CLEANER = None


def _cleaner(config, lang):
    global _CLEANER
    if _CLEANER is None or _CLEANER.config != config or _CLEANER.lang != lang:
        _CLEANER = DocumentCleaner(config, lang)
    return _CLEANER


def process_shard(shard: Shard, config: CleaningConfig, lang: str, text_field: str, strict: bool,
                  out_dir: str | Path) -> Shard:
    """Cleans one shard into out_dir/NAME.txt (fairseq-lm text), NAME.hashes.npz and NAME.json (its counts, written
    last: the shard is done), each atomically."""
    cleaner = _cleaner(config, lang)
    counts, errors, hashes = Counter(), [], ShardHashes(config)
    out = Path(out_dir, f"{shard.name}.txt")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(f"{out}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for piece in shard.pieces:
            for kind, *rest in read_documents(piece, text_field):
                if kind == "error":
                    if strict:
                        raise InputError(rest[0])
                    counts["unreadable_docs"] += 1
                    errors.append(rest[0])
                    continue
                _, text = rest
                counts["docs_in"] += 1
                words = text.split()
                counts["tokens_in"] += len(words)
                sentences = cleaner.clean(text, counts, words)
                if sentences is None:
                    continue
                if not sentences:
                    counts["empty_docs"] += 1
                    continue
                f.write("\n".join(sentences) + "\n\n")
                hashes.add(sentences)
    os.replace(tmp, out)
    hashes.save(out.with_suffix(".hashes.npz"))
    write_text(out.with_suffix(".json"), json.dumps({"counts": counts, "errors": errors[:20], "hashes": hashes.counts()}))
    return shard


def _shard_done(out_dir, shard):
    return Path(out_dir, f"{shard.name}.json").is_file()


def _read_docs(path):
    doc = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if is_blank(line):
                yield doc
                doc = []
            else:
                doc.append(line[:-1])


def _inputs(sources):
    """[path, size, mtime] of every file under the sources."""
    inputs = []
    for name, path in sources:
        for root, _, files in walk(path) if os.path.isdir(path) else [(os.path.dirname(path), [], [os.path.basename(path)])]:
            for f in files:
                p = os.path.join(root, f)
                if os.path.isfile(p):
                    st = os.stat(p)
                    inputs.append([p, st.st_size, st.st_mtime_ns])
    return inputs


SHARD_BYTES = 64 << 20  # the largest shard --shard-size gives by default
SHARDS_PER_WORKER = 4  # what a small input is cut into at least, so that no worker waits for another's one shard


def shard_size(given: int | None, inputs: Sequence[Sequence[str | int]], workers: int) -> int:
    """--shard-size, or by default 64 MiB, less for an input under 4 shards a worker of several (256 KiB at least)."""
    if given or workers == 1:
        return given or SHARD_BYTES
    total = sum(size for _, size, _ in inputs)
    return max(1 << 18, min(SHARD_BYTES, -(-total // (SHARDS_PER_WORKER * workers))))


def _fingerprint(options, config, sources, inputs):
    return {
        "version": FORMAT_VERSION, "sources": sources, "lang": options.lang, "cleaning": asdict(config),
        "text_field": options.text_field, "text_docs": options.text_docs, "shard_size": options.shard_size,
        **({"source_langid": sorted(map(list, options.source_langid))} if options.source_langid else {}),
        "valid_docs": options.valid_docs, "seed": options.seed, "inputs": sorted(inputs),
    }


def _split_large_compressed(pieces, options, work, stages):
    """The pieces of each source ({name: pieces}), with each large compressed file decompressed into parts of a shard
    under work/split, the files of every source at once, as a stage (a task a file). Under Slurm the submitting host
    is often a login node, and decompressing 100 GB there for hours is what the cluster is for; work/ is on a shared
    file system already, since the cleaning tasks write their shards there."""
    large = [(name, i) for name, found in pieces.items() for i, piece in enumerate(found)
             if needs_splitting(piece, options.shard_size)]
    jobs = [(pieces[name][i], options.shard_size, work / "split" / name / f"{i:05d}") for name, i in large]
    split = dict(zip(large, stages.map(_split_compressed, jobs, "split")))
    return {name: [part for i, piece in enumerate(found) for part in split.get((name, i), [piece])]
            for name, found in pieces.items()}


def _split_compressed(job):
    return split_compressed(*job)


def _map_array(function, jobs, options, folder):
    """function(*job) for each job, as submitit job arrays of at most --slurm-array-size one-core tasks (Slurm's, or
    submitit's local executor); yields the results in order as they come."""
    import submitit

    executor = submitit.AutoExecutor(folder=folder, cluster="local" if options.launcher == "submitit-local" else "slurm")
    params = {"timeout_min": options.slurm_time, "cpus_per_task": 1, "mem_gb": options.slurm_mem_gb}
    if options.launcher == "slurm":
        params.update(slurm_array_parallelism=options.workers, slurm_partition=options.slurm_partition)
    executor.update_parameters(**{k: v for k, v in params.items() if v is not None})
    submitted = []
    for start in range(0, len(jobs), options.slurm_array_size):  # arrays under the cluster's MaxArraySize
        submitted += executor.map_array(function, *zip(*jobs[start:start + options.slurm_array_size]))
    for job in submitted:
        yield job.result()


def _run_shards(pending, options, config, out_dir) -> None:
    from tqdm import tqdm

    bar = tqdm(total=sum(s.size for s in pending), unit="B", unit_scale=True, desc="cleaning", disable=options.quiet)
    levels = dict(options.source_langid or ())  # a source's own --langid (--source-langid)
    jobs = [(s, replace(config, langid=levels.get(s.source, config.langid)), options.lang, options.text_field,
             options.strict, str(out_dir)) for s in pending]
    if options.launcher == "local" and options.workers == 1:
        for job in jobs:
            process_shard(*job)
            bar.update(job[0].size)
    elif options.launcher == "local":
        import multiprocessing

        from biofairseq.interrupts import ignore_in_workers

        with multiprocessing.get_context("fork").Pool(options.workers, ignore_in_workers) as pool:
            for shard in pool.imap_unordered(_process_packed, jobs):
                bar.update(shard.size)
    else:  # the same shards as a job array, through submitit
        for shard in _map_array(process_shard, jobs, options, out_dir.parent / "submitit"):
            bar.update(shard.size)
    bar.close()


def _process_packed(packed):
    return process_shard(*packed)


class Stages:
    """Runs a stage's independent jobs where --launcher says: local worker processes, or a submitit job array (Slurm's,
    or submitit's local executor) whose folder work/submitit-NAME keeps each task's log. Under Slurm no stage reads
    the corpus on the submitting host: it submits the arrays, waits, and reads the tasks' small results."""

    def __init__(self, options, work) -> None:
        self.options, self.work = options, work

    def map(self, function: Callable[[_Job], _Result], jobs: Sequence[_Job], name: str) -> list[_Result]:
        """[function(job) for job in jobs], in order."""
        if self.options.launcher == "local":
            return map_jobs(function, jobs, min(self.options.workers, os.cpu_count() or 1))
        return list(_map_array(function, [(job,) for job in jobs], self.options, self.work / f"submitit-{name}"))


RANK = np.dtype([("hash", np.uint64), ("place", np.int64)])  # a kept document's seeded hash, and its place in its shard


def _rank(sentences, seed):
    return xxhash.xxh3_64_intdigest("\n".join(sentences).encode("utf-8"), seed=seed % (1 << 64))


def _smallest(hashes, count):
    """The ``count`` smallest of a shard's document hashes, with their places, in (hash, place) order."""
    ranks = np.empty(len(hashes), RANK)
    ranks["hash"], ranks["place"] = hashes, np.arange(len(hashes))
    if count == 0:
        return ranks[:0]
    if count < len(ranks):
        ranks = ranks[np.argpartition(ranks["hash"], count - 1)[:count]]
    return ranks[np.lexsort((ranks["place"], ranks["hash"]))]


def filter_shard(job: tuple[int, Path, tuple[Repeats, Repeats, Repeats], int, int, Path]) -> str:
    """One cleaned shard without its repeats, in work/kept: NAME.txt, NAME.ranks.npy (the hashes of its --valid-docs
    documents of smallest seeded hash, which the split draws from) and NAME.json (the counts of what it removed and
    kept, and its documents; written last: the shard is done). A task of its own, a shard at a time."""
    k, text, repeats, valid_docs, seed, out = job
    docs, near, sentences = (r.of_shard(k) for r in repeats)
    counts, hashes, place = Counter(), [], 0
    tmp = Path(f"{out}.txt.tmp")
    tmp.parent.mkdir(parents=True, exist_ok=True)
    with open(tmp, "w", encoding="utf-8") as f:
        for doc, lines in enumerate(_read_docs(text)):
            first, place = place, place + len(lines)
            if doc in docs:
                counts[f"duplicate_docs_{docs[doc]}"] += 1
                continue
            if doc in near:
                counts[f"near_duplicate_docs_{near[doc]}"] += 1
                continue
            kept = []
            for i, line in enumerate(lines, first):
                if i in sentences:
                    counts[f"duplicate_sentences_{sentences[i]}"] += 1
                else:
                    kept.append(line)
            if not kept:
                counts["empty_docs"] += 1
                continue
            counts["docs_out"] += 1
            counts["sentences_out"] += len(kept)
            counts["tokens_out"] += sum(s.count(" ") + 1 for s in kept)
            f.write("\n".join(kept) + "\n\n")
            hashes.append(_rank(kept, seed))
    os.replace(tmp, f"{out}.txt")
    ranks = _smallest(np.array(hashes, np.uint64), valid_docs)
    np.save(f"{out}.ranks.tmp.npy", ranks)
    os.replace(f"{out}.ranks.tmp.npy", f"{out}.ranks.npy")
    write_text(Path(f"{out}.json"), json.dumps({"counts": counts, "docs": len(hashes)}))
    return str(out)


def valid_places(ranks: Sequence[np.ndarray], valid_docs: int) -> dict[int, list[int]]:
    """{shard: [places]} of the valid_docs documents of smallest seeded hash over all shards (ranks[k]: shard k's
    smallest, as filter_shard keeps them), of identical texts the earlier first. A shard's valid_docs smallest are
    enough: a document that ranks among all shards' first valid_docs ranks among its own shard's."""
    if not valid_docs or not ranks:
        return {}
    shard = np.repeat(np.arange(len(ranks)), [len(r) for r in ranks])
    every = np.concatenate(ranks)
    chosen = np.lexsort((every["place"], shard, every["hash"]))[:valid_docs]
    places = {}
    for k, p in sorted(zip(shard[chosen].tolist(), every["place"][chosen].tolist())):
        places.setdefault(k, []).append(p)
    return places


def write_splits(job: tuple[Sequence[str], dict[int, list[int]], str]) -> None:
    """train.txt / valid.txt from the kept shards in corpus order, the valid places of each to validation: one pass
    over the kept text, a task of its own (under a job-array launcher, not on the submitting host)."""
    kept, places, output_dir = job
    output_dir = Path(output_dir)
    tmp = {split: open(output_dir / f"{split}.txt.tmp", "w", encoding="utf-8") for split in ("train", "valid")}
    try:
        for k, path in enumerate(kept):
            valid = set(places.get(k, ()))
            for doc, sentences in enumerate(_read_docs(f"{path}.txt")):
                tmp["valid" if doc in valid else "train"].write("\n".join(sentences) + "\n\n")
    finally:
        for f in tmp.values():
            f.close()
    for split in ("train", "valid"):
        os.replace(output_dir / f"{split}.txt.tmp", output_dir / f"{split}.txt")


def _deduplicate(shards, sources, config, shard_dir, work, stages, bucket_hashes, valid_docs, seed):
    """The repeats of the cleaned shards (biofairseq.corpus.dedup, its partitions and buckets as stages), then each shard
    without them (a stage of a task a shard). Returns the kept shards' paths in corpus order, per-source counts and
    errors, and the number of documents kept. Resumes: a kind of repeats flagged, a shard filtered, is not redone."""
    ordered = [s for name, _ in sources for s in shards if s.source == name]
    source_index = {name: i for i, (name, _) in enumerate(sources)}
    results = [json.loads(Path(shard_dir, f"{s.name}.json").read_text()) for s in ordered]
    counts = Counter()
    for result in results:
        counts.update(result["hashes"])
    kept_dir = work / "kept"
    kept_dir.mkdir(exist_ok=True)
    kept = [kept_dir / s.name for s in ordered]
    pending = [k for k, path in enumerate(kept) if not Path(f"{path}.json").is_file()]
    if pending:
        repeats = find_repeats(
            [Path(shard_dir, f"{s.name}.hashes.npz") for s in ordered], [source_index[s.source] for s in ordered],
            config, work / "dedup", 1, bucket_hashes, lambda function, jobs: stages.map(function, jobs, "dedup"), counts)
        stages.map(filter_shard, [(k, Path(shard_dir, f"{ordered[k].name}.txt"), repeats, valid_docs, seed, kept[k])
                                  for k in pending], "filter")
    per_source = {name: Counter() for name, _ in sources}
    errors = {name: [] for name, _ in sources}
    n_docs = 0
    for shard, result, path in zip(ordered, results, kept):
        done = json.loads(Path(f"{path}.json").read_text())
        per_source[shard.source].update(result["counts"])
        per_source[shard.source].update(done["counts"])
        errors[shard.source].extend(result["errors"])
        n_docs += done["docs"]
    shutil.rmtree(work / "dedup", ignore_errors=True)
    return kept, per_source, errors, n_docs


def _split(kept, output_dir, valid_docs, stages) -> None:
    """train.txt / valid.txt: the valid_docs kept documents whose 64-bit xxhash of their text, seeded with --seed, is
    smallest go to validation (of identical texts, the earlier first), the rest to training, both in corpus order.

    A document's rank depends on its text and the seed alone, not on the number of documents: cleaning again with
    one more source keeps every valid document that no new one outranks, where drawing valid_docs of n_docs positions
    drew a new valid set. The host reads each shard's valid_docs smallest hashes; one task writes the two files."""
    places = valid_places([np.load(f"{path}.ranks.npy") for path in kept], valid_docs)
    stages.map(write_splits, [([str(p) for p in kept], places, str(output_dir))], "split-valid")


COLUMNS = ("files_in", "docs_in", "docs_out", "sentences_in", "sentences_out", "tokens_in", "tokens_out")
REMOVED = (
    "unreadable_docs", "other_language_docs", "empty_docs", "duplicate_docs_source", "duplicate_docs_global",
    "near_duplicate_docs_source", "near_duplicate_docs_global",
    *SENTENCE_FILTERS, "duplicate_sentences_source", "duplicate_sentences_global",
)


def format_table(stats: dict[str, Any]) -> str:
    """Per-source documents, sentences and whitespace tokens in and out, then what each filter removed."""
    rows = [*stats["sources"].items(), ("total", stats["total"])]
    lines = []
    for title, columns in (("kept", COLUMNS), ("removed", REMOVED)):
        lines.append(f"{title}:")
        lines.append(markdown_table(["source", *columns], [[name, *(f"{c.get(k, 0):,}" for k in columns)] for name, c in rows]))
    return "\n".join(lines)


def clean_corpus(options: CorpusOptions, config: CleaningConfig) -> dict[str, Any]:
    """Runs (or resumes) the whole cleaning; returns the statistics written to stats.json."""
    sources = [list(s) for s in options.sources]
    output_dir = Path(options.output_dir)
    work = output_dir / "work"
    inputs = _inputs(sources)
    # the fingerprint holds the shard size asked for (64 MiB by default, as before it adapted): a rerun with more
    # workers resumes the same run, from the shards its plan recorded
    fingerprint = _fingerprint(replace(options, shard_size=options.shard_size or SHARD_BYTES), config, sources, inputs)
    options = replace(options, shard_size=shard_size(options.shard_size, inputs, options.workers))
    stats_path = output_dir / "stats.json"
    if options.overwrite:
        for name in ("train.txt", "valid.txt", "stats.json"):
            (output_dir / name).unlink(missing_ok=True)
        shutil.rmtree(work, ignore_errors=True)
    if stats_path.is_file():
        stats = json.loads(stats_path.read_text())
        if stats.get("fingerprint") == fingerprint:
            return stats
        raise InputError(f"{output_dir}: holds a cleaned corpus made with other arguments or inputs; use another --output-dir or --overwrite")
    output_existed = output_dir.exists()
    work.mkdir(parents=True, exist_ok=True)
    plan_path = work / "plan.json"
    plan = json.loads(plan_path.read_text()) if plan_path.is_file() else None
    if plan and plan["fingerprint"] != fingerprint:  # a killed run's shards: kept for its own resume
        raise InputError(f"{work}: holds an unfinished run with other arguments or inputs; use another --output-dir or --overwrite")
    try:
        return _clean(options, config, sources, output_dir, work, plan, fingerprint)
    except InputError:
        # a failed run leaves nothing that the corrected rerun would trip on (its outputs appear only on success)
        shutil.rmtree(work, ignore_errors=True)
        if not output_existed:
            shutil.rmtree(output_dir, ignore_errors=True)
        raise


def _nothing_left(total, errors, lang) -> str:
    """Why no document is left, naming the stage that removed them and the setting to check."""
    read, first_error = total["docs_in"], next((e for errs in errors.values() for e in errs), None)
    if not read:
        unreadable = sum(len(e) for e in errors.values())
        return f"no document could be read ({unreadable} unreadable input(s), e.g. {first_error})"
    stages = [
        (total["other_language_docs"], f"the language filter removed {total['other_language_docs']:,} (not identified as "
                                       f"--lang {lang}; check --lang, or --langid off)"),
        (total["empty_docs"], f"the sentence filters left {total['empty_docs']:,} with no sentence (see --min-words, "
                              "--min-letter-ratio and the other filters in --help)"),
        (sum(total[f"{kind}_docs_{where}"] for kind in ("duplicate", "near_duplicate") for where in ("source", "global")),
         "deduplication removed the rest as repeats"),
    ]
    said = "; ".join(text for count, text in sorted(stages, key=lambda s: -s[0]) if count)
    return f"no document left after cleaning: of {read:,} read, {said}"


def _few_documents(shards, per_source) -> str:
    """Where text read at blank lines gave far fewer documents than it has lines: how they were told apart, and the
    option that reads a document a line ('' if no source looks so)."""
    for name, counts in per_source.items():
        paths = {p.path for s in shards if s.source == name for p in s.pieces if p.fmt == "text"}  # cut pieces once
        lines = 0
        for path in paths:
            with open_compressed(path) as f:
                lines += sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
        if paths and lines >= 10 * max(1, counts["docs_in"]):
            return (f" ({name}: {lines:,} lines of text read as {counts['docs_in']:,} document(s), since a blank line "
                    "separates documents; if each line is a document, clean with --text-docs line, TEXT_DOCS=line in the recipes)")
    return ""


def _clean(options, config, sources, output_dir, work, plan, fingerprint):
    clock = time.perf_counter()
    seconds = {}
    stages = Stages(options, work)
    plan_path = work / "plan.json"
    if plan:
        shards = [Shard.from_json(s) for s in plan["shards"]]
        discovery_errors = plan["errors"]
    else:
        pieces, discovery_errors = {}, {}
        for name, path in sources:
            pieces[name], errors = discover(path, options.text_docs)
            if errors and options.strict:
                raise InputError(errors[0])
            discovery_errors[name] = errors
        pieces = _split_large_compressed(pieces, options, work, stages)
        shards = [shard for name, _ in sources for shard in plan_shards(name, pieces[name], options.shard_size)]
        write_text(plan_path, json.dumps({"fingerprint": fingerprint, "shards": [s.to_json() for s in shards], "errors": discovery_errors}))
    shard_dir = work / "shards"
    for tmp in shard_dir.glob("*/*.tmp") if shard_dir.is_dir() else []:
        tmp.unlink()
    pending = [s for s in shards if not _shard_done(shard_dir, s)]
    if pending:  # what the later stages made of the shards, if anything, is of an earlier cleaning's
        for later in ("dedup", "kept"):
            shutil.rmtree(work / later, ignore_errors=True)
    if len(pending) < len(shards) and not options.quiet:
        print(f"resuming: {len(shards) - len(pending)} of {len(shards)} shards already cleaned", file=sys.stderr)
    seconds["plan"], clock = time.perf_counter() - clock, time.perf_counter()
    _run_shards(pending, options, config, shard_dir)
    seconds["clean_shards"], clock = time.perf_counter() - clock, time.perf_counter()

    kept, per_source, errors, n_docs = _deduplicate(shards, sources, config, shard_dir, work, stages,
                                                    options.dedup_bucket_hashes, options.valid_docs, options.seed)
    seconds["deduplicate"], clock = time.perf_counter() - clock, time.perf_counter()
    warnings = []
    for name, _ in sources:
        pieces = [p for s in shards if s.source == name for p in s.pieces]
        per_source[name]["files_in"] = len({p.named for p in pieces})
        text_files = len({p.named for p in pieces if p.fmt == "text"})
        if text_files > 1 and per_source[name]["docs_in"] >= 2 * text_files:
            warnings.append(
                f"{name}: {text_files:,} text files became {per_source[name]['docs_in']:,} documents, split at blank lines; "
                "if each file is one document (a clinical case, a note), clean again with --text-docs file"
            )
    for name, messages in discovery_errors.items():
        per_source[name]["unreadable_docs"] += len(messages)
        errors[name] = messages + errors[name]
    total = Counter()
    for counts in per_source.values():
        total.update(counts)
    if n_docs == 0:
        raise InputError(_nothing_left(total, errors, options.lang))
    if n_docs <= options.valid_docs:
        fix = f"use --valid-docs {max(1, n_docs // 10)} (below {n_docs:,}), or give more text" if n_docs > 1 else "give more text"
        raise InputError(f"--valid-docs {options.valid_docs}: only {n_docs:,} document{'s' * (n_docs > 1)} left after "
                         f"cleaning{_few_documents(shards, per_source)}; {fix}")
    _split(kept, output_dir, options.valid_docs, stages)
    seconds["split"] = time.perf_counter() - clock
    stats = {
        "sources": {name: dict(c) for name, c in per_source.items()}, "total": dict(total),
        "train_docs": n_docs - options.valid_docs, "valid_docs": options.valid_docs,
        "errors": {name: e[:100] for name, e in errors.items() if e}, "warnings": warnings, "fingerprint": fingerprint,
    }
    # where this run's time went (only the unfinished shards, when it resumed), apart from the reproducible stats
    write_text(output_dir / "timing.json", json.dumps({k: round(v, 2) for k, v in seconds.items()}) + "\n")
    write_text(output_dir / "stats.json", json.dumps(stats, indent=1, ensure_ascii=False))
    if not options.keep_work:
        shutil.rmtree(work)
    return stats
