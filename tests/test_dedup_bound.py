"""Deduplication's memory is bounded by --dedup-bucket-hashes however often a sentence repeats, and it still keeps what
one pass with a dict of every hash keeps (biofairseq.corpus.dedup). The per-shard hash files are written here with
numpy, so no cleaning runs."""

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from biofairseq.corpus.dedup import LOCAL_BITS, find_repeats


def write_shard(path, sentences, doc_of_sentence, docs, near):
    np.savez(path, docs=np.asarray(docs, np.uint64), near=np.asarray(near, np.uint64),
             sentences=np.asarray(sentences, np.uint64), sentence_places=np.arange(len(sentences), dtype=np.uint32),
             sentence_docs=np.asarray(doc_of_sentence, np.uint32))


def one_pass(shards, sources):
    """The oracle: the repeats of one pass over every shard in corpus order, with a dict of the hashes seen and the
    source where each was first seen, as {(kind, shard, place): "source" or "global"}. Near-duplicate keys are taken
    from the documents that exact deduplication kept; a document with several repeated keys is "source" if one of
    them was first seen in its own source; sentences from the documents that neither removed."""
    found, seen = {}, {"docs": {}, "near": {}, "sentences": {}}

    def repeat(kind, key, source):
        """None the first time key is seen, else whether it was first seen in this source or another."""
        if key not in seen[kind]:
            seen[kind][key] = source
            return None
        return "source" if seen[kind][key] == source else "global"

    for k, shard in enumerate(shards):
        docs, near, sentences = {}, {}, {}
        for place, h in enumerate(shard["docs"]):
            if flag := repeat("docs", h, sources[k]):
                docs[place] = flag
        for place, keys in enumerate(shard["near"]):
            flags = [repeat("near", key, sources[k]) for key in keys] if place not in docs else []
            if any(flags):
                near[place] = "source" if "source" in flags else "global"
        for place, (h, doc) in enumerate(zip(shard["sentences"], shard["sentence_docs"])):
            if doc not in docs and doc not in near and (flag := repeat("sentences", h, sources[k])):
                sentences[place] = flag
        for kind, repeats in (("docs", docs), ("near", near), ("sentences", sentences)):
            found.update({(kind, k, place): flag for place, flag in repeats.items()})
    return found


def found_by(repeats, n_shards):
    return {(kind, k, place): flag for kind, r in zip(("docs", "near", "sentences"), repeats)
            for k in range(n_shards) for place, flag in r.of_shard(k).items()}


MEASURE = """
import json, sys
from pathlib import Path
from types import SimpleNamespace
import numpy as np
from biofairseq.corpus.dedup import find_repeats

work, n, bucket_hashes = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
config = SimpleNamespace(dedup_documents=False, near_duplicates=0, dedup_sentences=True)
def status(key):
    return next(int(l.split()[1]) for l in Path("/proc/self/status").read_text().splitlines() if l.startswith(key))

Path("/proc/self/clear_refs").write_text("5")  # the peak resident memory (VmHWM) starts again from what is resident
before = status("VmRSS:")
_, _, sentences = find_repeats([work / f"{k}.npz" for k in range(n)], [k * 2 // n for k in range(n)], config,
                               work / "dedup", 1, bucket_hashes)
grew_kb = status("VmHWM:") - before
places, flags = [], []
for k in range(n):
    found = sentences.of_shard(k)
    places.append(np.array(sorted(found), np.int64) + (k << 32))
    flags.append(np.array([found[p] == "source" for p in sorted(found)], bool))
np.savez(work / "found.npz", ids=np.concatenate(places), same=np.concatenate(flags))
print(json.dumps({"grew_kb": grew_kb, "held": getattr(sentences, "largest_held", None)}))
"""


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="measures the peak with Linux's /proc")
def test_a_sentence_repeated_a_million_times_stays_within_the_bound(tmp_path):
    """1,000,000 copies of one sentence among 20,000 distinct ones, in 50 shards of two sources, deduplicated 10,000
    hashes at a time: the process's peak resident memory grows by less than 8 MB, half of what the copies' (hash, id)
    pairs alone take if one bucket holds them (buckets cut by a hash's top bits alone grew it by 64 MB), the most
    hashes a merge held is within the bound, and the repeats are the one-pass answer."""
    n, copies, unique = 50, 20_000, 400
    rng = np.random.default_rng(0)
    boilerplate = np.uint64(rng.integers(0, 1 << 63, dtype=np.int64))
    shards = []
    for k in range(n):
        sentences = np.full(copies + unique, boilerplate, np.uint64)
        sentences[rng.choice(copies + unique, unique, replace=False)] = rng.integers(1, 1 << 63, unique, dtype=np.int64)
        doc_of_sentence = np.arange(len(sentences)) // 10
        write_shard(tmp_path / f"{k}.npz", sentences, doc_of_sentence, np.arange(doc_of_sentence[-1] + 1) + (k << 20),
                    np.empty((doc_of_sentence[-1] + 1, 0)))
        shards.append(sentences)
    run = subprocess.run([sys.executable, "-c", MEASURE, tmp_path, str(n), "10000"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    measured = json.loads(run.stdout.splitlines()[-1])
    grew_mb = measured["grew_kb"] / 1024
    assert grew_mb < 8, f"peak memory grew by {grew_mb:.1f} MB deduplicating 10,000 hashes at a time"
    assert 0 < measured["held"] <= 10_000

    # one pass, in corpus order: every occurrence of a hash after its first, and whether the first was in its source
    hashes = np.concatenate(shards)
    ids = np.concatenate([(k << LOCAL_BITS) + np.arange(len(s), dtype=np.int64) for k, s in enumerate(shards)])
    sources = np.repeat([k * 2 // n for k in range(n)], [len(s) for s in shards])
    _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    first = first[inverse.ravel()]  # where each hash was first seen
    repeat = first != np.arange(len(hashes))
    expected_ids, expected_same = ids[repeat], sources[first][repeat] == sources[repeat]
    with np.load(tmp_path / "found.npz") as found:
        assert np.array_equal(found["ids"], expected_ids)
        assert np.array_equal(found["same"], expected_same)
    assert len(expected_ids) == n * copies - 1 and 0 < expected_same.sum() < len(expected_same)


@pytest.mark.parametrize("seed", range(12))
def test_heavy_repetition_keeps_what_one_pass_keeps(tmp_path, seed):
    """Random corpora drawn from a handful of hashes (so most items repeat, in the same shard, across shards and
    across sources), in several shards and sources, with tiny buckets: documents, near-duplicate keys and sentences
    are found as one pass finds them, flags included."""
    rng = np.random.default_rng(seed)
    n_shards, n_sources = int(rng.integers(1, 7)), int(rng.integers(1, 4))
    sources = np.sort(rng.integers(0, n_sources, n_shards)).tolist()
    pool = lambda size: rng.integers(0, 1 << 63, size, dtype=np.int64).astype(np.uint64) << np.uint64(1)  # noqa: E731
    doc_pool, key_pool, sentence_pool = pool(rng.integers(2, 8)), pool(rng.integers(3, 30)), pool(rng.integers(1, 12))
    bands = int(rng.integers(1, 5))
    shards = []
    for k in range(n_shards):
        n_docs = int(rng.integers(0, 40))
        per_doc = rng.integers(1, 6, n_docs)
        doc_of_sentence = np.repeat(np.arange(n_docs), per_doc)
        shard = dict(docs=rng.choice(doc_pool, n_docs), near=rng.choice(key_pool, (n_docs, bands)),
                     sentences=rng.choice(sentence_pool, len(doc_of_sentence)), sentence_docs=doc_of_sentence)
        write_shard(tmp_path / f"{k}.npz", shard["sentences"], doc_of_sentence, shard["docs"], shard["near"])
        shards.append({key: value.tolist() for key, value in shard.items()})
    config = SimpleNamespace(dedup_documents=True, near_duplicates=0.8, dedup_sentences=True)
    repeats = find_repeats([tmp_path / f"{k}.npz" for k in range(n_shards)], sources, config, tmp_path / "dedup",
                           int(rng.integers(1, 3)), int(rng.integers(1, 20)))
    expected = one_pass(shards, sources)
    assert found_by(repeats, n_shards) == expected
    assert any(flag == "source" for flag in expected.values())
