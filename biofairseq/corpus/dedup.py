"""Deduplication that scales out: the cleaning workers write 64-bit hashes beside their shards; the hashes are
partitioned into buckets by their top bits and each bucket is deduplicated on its own, in parallel, with numpy.

The first occurrence in corpus order (sources in the order given, shards in order, documents and sentences in order)
is kept, as a single pass holding every hash in a dict would keep it; memory is about 40 bytes a hash (16 stored, the
rest the sort's temporaries) for the bucket being sorted (``--dedup-bucket-hashes`` bounds a bucket), not 80 bytes per
unique hash for the whole corpus.
Documents are deduplicated first; near-duplicate documents (optional: MinHash LSH band keys, deduplicated the same
way) second; the sentences of the documents that stay, last.
"""

import os
from pathlib import Path

import numpy as np
import xxhash

from biofairseq.corpus.processes import map_jobs

LOCAL_BITS = 32  # an item's id: its shard's place in corpus order, then its place in the shard


def text_hash(text):
    return xxhash.xxh3_64_intdigest(text.encode("utf-8"))


SHINGLE_WORDS = 5  # near-duplicates: documents as sets of word 5-grams
NUM_PERM = 128


class NearDuplicateKeys:
    """A document's LSH band keys: a MinHash of its word 5-grams (datasketch, 128 permutations) cut into the bands
    datasketch's MinHashLSH chooses for the threshold, each band hashed to 64 bits. Two documents that share a key
    are near-duplicates: at Jaccard similarity s they do with probability 1 - (1 - s^r)^b."""

    def __init__(self, threshold):
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

    def __init__(self, config):
        self.config = config
        self.docs, self.sentences, self.sentence_places, self.sentence_docs = [], [], [], []
        self.near = []
        self.near_keys = NearDuplicateKeys(config.near_duplicates) if config.near_duplicates else None
        self.n_sentences = 0

    def add(self, sentences):
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

    def save(self, path):
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


ITEM = np.dtype([("hash", np.uint64), ("id", np.uint64)])


def _save(path, array):
    tmp = Path(f"{path}.tmp.npy")
    np.save(tmp, array)
    os.replace(tmp, path)


def _partition(hashes, ids, bits, path):
    """(hash, id) items ordered by bucket (path), and where each bucket starts (path.starts.npy)."""
    buckets = (hashes >> np.uint64(64 - bits)).astype(np.int64) if bits else np.zeros(len(hashes), np.int64)
    order = np.argsort(buckets, kind="stable")
    items = np.empty(len(order), ITEM)
    items["hash"], items["id"] = hashes[order], ids[order]
    _save(f"{path}.starts.npy", np.searchsorted(buckets[order], np.arange((1 << bits) + 1)))
    _save(path, items)


def _dedup_bucket(job):
    """The ids of the repeats in one bucket, sorted, and for each whether its first occurrence is in the same source."""
    bucket, parts, shard_sources, out = job
    items = []
    for part in parts:  # memory-mapped: only this bucket's slice of each shard is read
        starts = np.load(f"{part}.starts.npy")
        items.append(np.load(part, mmap_mode="r")[starts[bucket]:starts[bucket + 1]])
    items = np.concatenate(items) if items else np.empty(0, ITEM)
    hashes, ids = items["hash"], items["id"]
    del items
    order = np.lexsort((ids, hashes))  # by hash, then corpus order
    hashes, ids = hashes[order], ids[order]
    first = np.ones(len(hashes), bool)
    first[1:] = hashes[1:] != hashes[:-1]
    first_of = ids[np.maximum.accumulate(np.where(first, np.arange(len(ids)), 0))]
    source = shard_sources[(ids >> np.uint64(LOCAL_BITS)).astype(np.int64)]
    first_source = shard_sources[(first_of >> np.uint64(LOCAL_BITS)).astype(np.int64)]
    repeats = ~first
    order = np.argsort(ids[repeats])
    _save(f"{out}.same_source.npy", (source == first_source)[repeats][order])
    _save(out, ids[repeats][order])
    return out


class Repeats:
    """The repeats the buckets found, read back one shard at a time: {place in shard: "source" or "global"}."""

    def __init__(self, paths):
        self.parts = [(np.load(p, mmap_mode="r"), np.load(f"{p}.same_source.npy", mmap_mode="r")) for p in paths]

    def of_shard(self, k):
        lo, hi = np.uint64(k << LOCAL_BITS), np.uint64((k + 1) << LOCAL_BITS)
        found = {}
        for ids, same in self.parts:
            a, b = np.searchsorted(ids, lo), np.searchsorted(ids, hi)
            places = (np.asarray(ids[a:b]) - lo).tolist()
            found.update(zip(places, np.where(same[a:b], "source", "global").tolist()))
        return found


def _ids(k, places):
    """Corpus-order ids of shard k's items at these places."""
    return (np.uint64(k) << np.uint64(LOCAL_BITS)) | np.asarray(places).astype(np.uint64)


def _sentences_of_kept_docs(job):
    k, hashes_path, removed_docs, bits, out = job
    with np.load(hashes_path) as h:
        keep = ~np.isin(h["sentence_docs"], np.array(removed_docs, np.uint32))
        _partition(h["sentences"][keep], _ids(k, h["sentence_places"][keep]), bits, out)


def _docs(job):
    k, hashes_path, _, bits, out = job
    with np.load(hashes_path) as h:
        _partition(h["docs"], _ids(k, np.arange(len(h["docs"]))), bits, out)


def _near_keys_of_kept_docs(job):
    """Every band key of the documents that exact deduplication kept, each with its document's id."""
    k, hashes_path, removed_docs, bits, out = job
    with np.load(hashes_path) as h:
        near = h["near"]
        docs = np.setdiff1d(np.arange(len(near)), np.array(removed_docs, np.int64))
        _partition(near[docs].reshape(-1), _ids(k, np.repeat(docs, near.shape[1])), bits, out)


def _count(hashes_paths, key, per_row=False):
    total = 0
    for path in hashes_paths:
        with np.load(path) as h:
            total += h[key].size if per_row else len(h[key])
    return total


def find_repeats(hashes_paths, shard_sources, config, work, workers, bucket_hashes):
    """(document repeats, near-duplicate documents, sentence repeats) of the shards in corpus order (hashes_paths[k]
    is shard k's). A near-duplicate shares an LSH band key with an earlier document that exact deduplication kept
    (whether or not that one is itself a near-duplicate of another)."""
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    shard_sources = np.asarray(shard_sources, np.int64)

    def run(kind, partition, bits, removed=None):
        """Partitions every shard's items of this kind into buckets, then finds the repeats bucket by bucket."""
        parts = [work / f"{kind}.{k}.npy" for k in range(len(hashes_paths))]
        map_jobs(partition, [(k, p, sorted(removed(k)) if removed else [], bits, part)
                             for k, (p, part) in enumerate(zip(hashes_paths, parts))], workers)
        outs = map_jobs(_dedup_bucket, [(b, parts, shard_sources, work / f"{kind}.repeats.{b}.npy")
                                        for b in range(1 << bits)], workers)
        for part in parts:
            os.remove(part)
            os.remove(f"{part}.starts.npy")
        return Repeats(outs)

    n = len(hashes_paths)
    docs = near = sentences = Repeats([])
    bits = lambda key, per_row=False: _bucket_bits(_count(hashes_paths, key, per_row), bucket_hashes)  # noqa: E731
    if config.dedup_documents and n:
        docs = run("docs", _docs, bits("docs"))
    if config.near_duplicates and n:
        near = run("near", _near_keys_of_kept_docs, bits("near", per_row=True), removed=docs.of_shard)
    if config.dedup_sentences and n:
        sentences = run("sentences", _sentences_of_kept_docs, bits("sentences"),
                        removed=lambda k: {*docs.of_shard(k), *near.of_shard(k)})
    return docs, near, sentences
