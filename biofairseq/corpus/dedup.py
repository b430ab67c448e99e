"""Deduplication that scales out: the cleaning workers write 64-bit hashes beside their shards; each shard's hashes
are cut into runs sorted by hash, one run a bucket (the hash's top bits), and each bucket is deduplicated on its own,
in parallel, by a streaming merge of its runs, read in chunks.

The first occurrence in corpus order (sources in the order given, shards in order, documents and sentences in order)
is kept, and each repeat is counted in its own source or across sources, as a single pass holding every hash in a dict
would do. Memory: a bucket job holds at most ``--dedup-bucket-hashes`` hashes (one a shard if the shards are more),
about 55 bytes each with the merge's temporaries (measured at 2^22: 54 bytes; 2^24, the default: about 0.9 GiB a
worker), however often a hash repeats; a partition job holds one shard's hashes (about 50 bytes each); not 80 bytes
per unique hash for the whole corpus. On disk, about 17 bytes a hash until the pipeline removes its work folder.

Why runs and a merge: buckets cut by top bits alone put every copy of a sentence in one bucket, and a boilerplate
line that clinical notes repeat tens of millions of times filled it past the bound (4,000 hashes over 8 buckets of
500: one held 2,259). A hash's later copies in a shard are repeats whatever the other shards hold, so a shard's run
has each hash once and a merge step settles a hash with at most one copy a shard in memory.
Documents are deduplicated first; near-duplicate documents (optional: MinHash LSH band keys, deduplicated the same
way) second; the sentences of the documents that stay, last.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np
import xxhash

from biofairseq.atomic import write_text
from biofairseq.corpus.processes import map_jobs

if TYPE_CHECKING:
    from biofairseq.corpus.cleaning import CleaningConfig

LOCAL_BITS = 32  # an item's id: its shard's place in corpus order, then its place in the shard


def text_hash(text: str) -> int:
    return xxhash.xxh3_64_intdigest(text.encode("utf-8"))


SHINGLE_WORDS = 5  # near-duplicates: documents as sets of word 5-grams
NUM_PERM = 128


class NearDuplicateKeys:
    """A document's LSH band keys: a MinHash of its word 5-grams (datasketch, 128 permutations) cut into the bands
    datasketch's MinHashLSH chooses for the threshold, each band hashed to 64 bits. Two documents that share a key
    are near-duplicates: at Jaccard similarity s they do with probability 1 - (1 - s^r)^b."""

    def __init__(self, threshold) -> None:
        from datasketch import MinHashLSH

        lsh = MinHashLSH(threshold=threshold, num_perm=NUM_PERM)
        self.bands, self.rows = lsh.b, lsh.r

    def __call__(self, words):
        from datasketch import MinHash

        shingles = {" ".join(words[i:i + SHINGLE_WORDS]) for i in range(max(1, len(words) - SHINGLE_WORDS + 1))}
        signature = MinHash(num_perm=NUM_PERM, seed=1, hashfunc=xxhash.xxh32_intdigest)
        signature.update_batch([s.encode("utf-8") for s in shingles])
        values = signature.hashvalues.astype(np.uint64)
        return [xxhash.xxh3_64_intdigest(values[b * self.rows:(b + 1) * self.rows].tobytes(), seed=b)
                for b in range(self.bands)]


class ShardHashes:
    """What a cleaning worker records of its shard: each document's hash (and its near-duplicate keys, when asked
    for), and each long-enough sentence's hash with its place among the shard's sentences and its document."""

    def __init__(self, config) -> None:
        self.config = config
        self.docs, self.sentences, self.sentence_places, self.sentence_docs = [], [], [], []
        self.near = []
        self.near_keys = NearDuplicateKeys(config.near_duplicates) if config.near_duplicates else None
        self.n_sentences = 0

    def add(self, sentences: Sequence[str]) -> None:
        doc = len(self.docs)
        self.docs.append(text_hash("\n".join(sentences)))
        if self.near_keys:
            self.near.append(self.near_keys(" ".join(sentences).lower().split()))
        for s in sentences:
            if s.count(" ") + 1 >= self.config.dedup_sentence_min_words:
                self.sentences.append(text_hash(s))
                self.sentence_places.append(self.n_sentences)
                self.sentence_docs.append(doc)
            self.n_sentences += 1

    def counts(self) -> dict[str, int]:
        """How many items of each kind the shard gives deduplication (find_repeats' counts, summed over shards)."""
        return {"docs": len(self.docs), "near": len(self.near) * (self.near_keys.bands if self.near_keys else 0),
                "sentences": len(self.sentences)}

    def save(self, path: str | Path) -> None:
        tmp = Path(f"{path}.tmp.npz")
        bands = self.near_keys.bands if self.near_keys else 0
        np.savez(tmp, docs=np.array(self.docs, np.uint64), near=np.array(self.near, np.uint64).reshape(len(self.near), bands),
                 sentences=np.array(self.sentences, np.uint64),
                 sentence_places=np.array(self.sentence_places, np.uint32),
                 sentence_docs=np.array(self.sentence_docs, np.uint32))
        os.replace(tmp, path)


def _bucket_bits(total, bucket_hashes):
    bits = 0
    while total > bucket_hashes << bits and bits < 16:
        bits += 1
    return bits


LOCAL = np.dtype([("id", np.uint64), ("first", np.int64)])  # a shard's later copy: its id, its first copy's item
SAME, OTHER = 1, 2  # an item's flag when it repeats one first seen in its own source, or in another


def _save(path, array) -> None:
    tmp = Path(f"{path}.tmp.npy")
    np.save(tmp, array)
    os.replace(tmp, path)


def _partition(hashes, ids, bits, path) -> None:
    """One shard's items as sorted runs, one run a bucket. A hash's later copies in the shard repeat its first copy
    whatever the other shards hold, so a run has each hash once, with its first id, in hash order (path.hashes and
    path.ids, raw; path.starts.npy: where each bucket's run starts); the later copies go aside (path.local.npy) with
    the item of their first copy, whose flag they take. path.flags: a byte an item, which the buckets set."""
    order = np.lexsort((ids, hashes))
    hashes, ids = hashes[order], ids[order]
    first = np.ones(len(hashes), bool)
    first[1:] = hashes[1:] != hashes[:-1]
    local = np.empty(int((~first).sum()), LOCAL)
    local["id"], local["first"] = ids[~first], (np.cumsum(first) - 1)[~first]
    hashes, ids = hashes[first], ids[first]
    buckets = (hashes >> np.uint64(64 - bits)).astype(np.int64) if bits else np.zeros(len(hashes), np.int64)
    _save(f"{path}.local.npy", local)
    _save(f"{path}.starts.npy", np.searchsorted(buckets, np.arange((1 << bits) + 1)))
    for name, array in (("flags", np.zeros(len(hashes), np.uint8)), ("ids", ids), ("hashes", hashes)):
        array.tofile(f"{path}.{name}.tmp")
        os.replace(f"{path}.{name}.tmp", f"{path}.{name}")


def _dedup_bucket(job):
    """Flags the repeats of one bucket: a merge of the shards' runs, read in chunks so that at most `bound` hashes are
    held at once, however many copies a hash has. Each step takes every hash up to the smallest last hash of the
    chunks held: no run has more of those, so each hash is settled in one step, and a stable sort puts its copies in
    corpus order (runs in shard order, a hash once a run), the first being the one kept. Returns the most it held."""
    bucket, parts, shard_sources, bound = job
    runs = []  # [shard, next item, end] of the runs not yet merged, in shard order
    for k, part in enumerate(parts):
        start, end = np.load(f"{part}.starts.npy")[bucket:bucket + 2].tolist()
        if end > start:
            runs.append([k, start, end])
    chunk, held, largest = max(1, bound // max(1, len(runs))), {}, 0
    while runs:
        for k, start, end in runs:  # plain reads: a memory map's pages would stay resident
            if not len(held.get(k, ())):
                held[k] = np.fromfile(f"{parts[k]}.hashes", np.uint64, min(chunk, end - start), offset=start * 8)
        largest = max(largest, sum(map(len, held.values())))
        last = min(held[k][-1] for k, _, _ in runs)
        taken = []
        for run in runs:
            k, start = run[:2]
            n = int(np.searchsorted(held[k], last, "right"))
            taken.append((k, start, held[k][:n]))
            held[k], run[1] = held[k][n:], start + n
        runs = [run for run in runs if run[1] < run[2]]
        order = np.argsort(np.concatenate([t for _, _, t in taken]), kind="stable")
        hashes = np.concatenate([t for _, _, t in taken])[order]
        first = np.ones(len(hashes), bool)
        first[1:] = hashes[1:] != hashes[:-1]
        del hashes
        source = np.repeat(shard_sources[[k for k, _, _ in taken]], [len(t) for _, _, t in taken])[order]
        flags = np.empty(len(order), np.uint8)
        flags[order] = np.where(first, 0, np.where(source == source[first][np.cumsum(first) - 1], SAME, OTHER))
        del order, first, source
        at = 0
        for k, start, t in taken:
            if flags[at:at + len(t)].any():
                with open(f"{parts[k]}.flags", "r+b") as f:  # the buckets write disjoint slices
                    f.seek(start)
                    f.write(flags[at:at + len(t)].tobytes())
            at += len(t)
        del taken, flags
    return largest


class Repeats:
    """The repeats the buckets found, read back one shard at a time: {place in shard: "source" or "global"}. A place
    with several repeated items (a document's band keys) is "source" if one of them repeats its own source."""

    def __init__(self, parts, largest_held=0) -> None:
        self.parts, self.largest_held = parts, largest_held

    def of_shard(self, k: int) -> dict[int, str]:
        if not self.parts:
            return {}
        part = self.parts[k]
        ids, flags = np.fromfile(f"{part}.ids", np.uint64), np.fromfile(f"{part}.flags", np.uint8)
        local = np.load(f"{part}.local.npy")
        repeat = flags > 0
        ids = np.concatenate([ids[repeat], local["id"]])
        flags = np.concatenate([flags[repeat], np.where(flags[local["first"]] == OTHER, OTHER, SAME)])
        order = np.lexsort((flags, ids))[::-1]  # the dict keeps the last: the smallest flag of an id
        places = (ids[order] - np.uint64(k << LOCAL_BITS)).tolist()
        return dict(zip(places, np.where(flags[order] == SAME, "source", "global").tolist()))


def _ids(k, places):
    """Corpus-order ids of shard k's items at these places."""
    return (np.uint64(k) << np.uint64(LOCAL_BITS)) | np.asarray(places).astype(np.uint64)


def _removed(k, repeats):
    """The places of shard k's documents that these Repeats remove, read in the job: no list of them all is held."""
    return np.array(sorted({place for r in repeats for place in r.of_shard(k)}), np.int64)


def _sentences_of_kept_docs(job) -> None:
    k, hashes_path, removed, bits, out = job
    with np.load(hashes_path) as h:
        keep = ~np.isin(h["sentence_docs"], _removed(k, removed))
        _partition(h["sentences"][keep], _ids(k, h["sentence_places"][keep]), bits, out)


def _docs(job) -> None:
    k, hashes_path, _, bits, out = job
    with np.load(hashes_path) as h:
        _partition(h["docs"], _ids(k, np.arange(len(h["docs"]))), bits, out)


def _near_keys_of_kept_docs(job) -> None:
    """Every band key of the documents that exact deduplication kept, each with its document's id."""
    k, hashes_path, removed, bits, out = job
    with np.load(hashes_path) as h:
        near = h["near"]
        docs = np.setdiff1d(np.arange(len(near)), _removed(k, removed))
        _partition(near[docs].reshape(-1), _ids(k, np.repeat(docs, near.shape[1])), bits, out)


def _count(hashes_paths, key, per_row=False):
    total = 0
    for path in hashes_paths:
        with np.load(path) as h:
            total += h[key].size if per_row else len(h[key])
    return total


def find_repeats(hashes_paths: Sequence[str | Path], shard_sources: Sequence[int], config: CleaningConfig,
                 work: str | Path, workers: int, bucket_hashes: int,
                 run_jobs: Callable[[Callable[[tuple], Any], list[tuple]], list] | None = None,
                 counts: Mapping[str, int] | None = None) -> tuple[Repeats, Repeats, Repeats]:
    """(document repeats, near-duplicate documents, sentence repeats) of the shards in corpus order (hashes_paths[k]
    is shard k's), as Repeats whose files stay in work until it is removed. A near-duplicate shares an LSH band key
    with an earlier document that exact deduplication kept (whether or not that one is itself a near-duplicate of
    another). A bucket job holds at most bucket_hashes items; a partition job, one shard's.

    run_jobs(function, jobs) runs a stage's jobs (by default in ``workers`` local processes; the pipeline's may be job
    arrays); counts ({"docs", "near", "sentences": items in all shards}), where the caller has them, spare reading
    every shard's hashes here. A kind whose repeats were all flagged is not flagged again (a killed run resumes)."""
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    shard_sources = np.asarray(shard_sources, np.int64)
    run_jobs = run_jobs or (lambda function, jobs: map_jobs(function, jobs, workers))

    def run(kind: str, partition: Callable[[tuple], None], bits: int, removed: tuple[Repeats, ...] = ()) -> Repeats:
        """Partitions every shard's items of this kind into sorted runs by bucket, then flags the repeats bucket by
        bucket."""
        parts = [work / f"{kind}.{k}" for k in range(len(hashes_paths))]
        done = work / f"{kind}.done"
        if done.is_file():
            return Repeats(parts, int(done.read_text()))
        run_jobs(partition, [(k, p, removed, bits, part) for k, (p, part) in enumerate(zip(hashes_paths, parts))])
        held = max(run_jobs(_dedup_bucket, [(b, parts, shard_sources, bucket_hashes) for b in range(1 << bits)]),
                   default=0)
        write_text(done, str(held))
        return Repeats(parts, held)

    n = len(hashes_paths)
    docs = near = sentences = Repeats([])

    def bits(key: str, per_row: bool = False) -> int:
        total = counts[key] if counts is not None else _count(hashes_paths, key, per_row)
        return _bucket_bits(total, bucket_hashes)

    if config.dedup_documents and n:
        docs = run("docs", _docs, bits("docs"))
    if config.near_duplicates and n:
        near = run("near", _near_keys_of_kept_docs, bits("near", per_row=True), removed=(docs,))
    if config.dedup_sentences and n:
        sentences = run("sentences", _sentences_of_kept_docs, bits("sentences"), removed=(docs, near))
    return docs, near, sentences
