"""MinHash-LSH near duplicates: the method's pure functions (corpus/neardup.py) and its Beam stages
(corpus/neardup_beam.py) against the exact in-memory method; template spam and the chain limit:
test_corpus_neardup_spam.py; the whole corpus job runs it in test_corpus_pipeline."""

import collections
import hashlib
import json
import random
import tracemalloc

import apache_beam as beam
import numpy as np
import pytest

from benchmarks import element_sizes
from kolectra.corpus import neardup, neardup_beam, runners

A = "주인공이 왜 그랬는지 이해가 안 된다 했는데 결말 보고 납득함. 배우들 연기는 좋았다"
B = A + " ㅎㅎ"
C = "스토리가 너무 뻔해서 지루했다 다시는 안 봄"


@pytest.mark.parametrize("threshold", [0.5, 0.7, 0.8, 0.9])
def test_bands_rows_put_the_s_curve_near_the_threshold(threshold):
    bands, rows = neardup.bands_rows(threshold)
    assert bands * rows <= neardup.NUM_PERM
    assert abs((1 / bands) ** (1 / rows) - threshold) < 0.05


def test_the_hash_family_is_fixed_by_its_definition_not_by_numpys_generator():
    """(a, b) of hash function i come from SHA-256 of (seed, i): numpy may change how its Generator
    draws integers between versions, which would change which documents are near duplicates under
    the same corpus id. Spelled out here, so a change to them fails this test."""
    a, b = neardup.permutations(7, 3)
    for i in range(3):
        w = hashlib.sha256(f"minhash\x007\x00{i}".encode()).digest()
        assert int(a[i]) == 1 + int.from_bytes(w[:8], "little") % (2**31 - 1)
        assert int(b[i]) == int.from_bytes(w[8:16], "little") % 2**32
    assert a.dtype == b.dtype == np.uint64 and len(neardup.permutations(0)[0]) == neardup.NUM_PERM


def test_signature_agreement_estimates_jaccard():
    perms = neardup.permutations(seed=0)
    sig = {k: neardup.signature(t, perms) for k, t in (("a", A), ("b", B), ("c", C))}
    assert neardup.jaccard(A, B) > 0.85 and neardup.jaccard(A, C) < 0.1
    assert abs((sig["a"] == sig["b"]).mean() - neardup.jaccard(A, B)) < 0.1
    assert (sig["a"] == sig["c"]).mean() < 0.1
    np.testing.assert_array_equal(sig["a"], neardup.signature(A, neardup.permutations(seed=0)))  # stable


def test_a_document_of_max_chars_is_signed_in_slices_with_bounded_memory():
    """A document of the default max_chars (100,000 characters, as many shingles) is signed a slice
    of shingles at a time: the values of hashing them all at once, which held 194 MB at its peak."""
    from kolectra.corpus.config import default_config

    rng = np.random.default_rng(0)
    text = "".join(rng.choice([chr(c) for c in range(0xAC00, 0xAC00 + 11172)], size=default_config().max_chars))
    perms = neardup.permutations(0, 121)
    tracemalloc.start()
    try:
        sig = neardup.signature(text, perms)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    h = neardup.shingles(text)
    assert len(h) > 99_000 and peak < 32 << 20, peak
    whole = [((a * h + b) % neardup._PRIME).min() for a, b in zip(*perms)]  # a value at a time, all shingles
    np.testing.assert_array_equal(sig, np.array(whole, dtype=np.uint64))
    short = neardup.signature(A, perms)
    np.testing.assert_array_equal(short, ((perms[0][:, None] * neardup.shingles(A)[None, :] + perms[1][:, None])
                                          % neardup._PRIME).min(axis=1))


def test_band_keys_collide_only_for_similar_texts():
    perms = neardup.permutations(seed=0)
    bands, rows = neardup.bands_rows(0.8)
    keys = {k: set(neardup.band_keys(neardup.signature(t, perms), bands, rows)) for k, t in (("a", A), ("b", B), ("c", C))}
    assert len(keys["a"]) == bands
    assert keys["a"] & keys["b"]
    assert not keys["a"] & keys["c"]


def test_a_list_of_documents_is_signed_into_packed_band_records_a_signature_each_and_one_packed_chunk():
    """MinHash takes the corpus job's lists: each document's band records go packed (16 bytes each:
    the bucket and the compact id, per coarse key, at the bundle's end), its signature (with its id
    and group) in a chunk per signature group, and the list itself on to its marks as one packed
    chunk per group: no element a document (docs/corpus.md, near duplicates)."""
    from kolectra.corpus import neardup_bands, outputs

    bands, rows = neardup.bands_rows(0.8)
    sign = neardup_beam._Sign(bands, rows, seed=0, groups=4)
    sign.setup()
    sign.start_bundle()
    docs = [(outputs.text_key(t), {"source": "f.jsonl", "line": i, "text": t}) for i, t in enumerate((A, B, C))]
    out = list(sign.process(docs, {"f.jsonl": [5]}))
    out += [beam.pvalue.TaggedOutput(w.tag, w.value.value) if isinstance(w, beam.pvalue.TaggedOutput) else w.value
            for w in sign.finish_bundle()]  # windowed values at the bundle's end
    tagged = collections.defaultdict(list)
    for item in out:
        tag, value = (item.tag, item.value) if isinstance(item, beam.pvalue.TaggedOutput) else ("bands", item)
        tagged[tag].append(value)
    ids = [5 << neardup_beam.LINE_BITS | i for i in range(3)]
    groups = [outputs.bucket_of(key, 4) for key, _ in docs]
    sigs = tagged[neardup_beam.SIGS]  # (signature group, (SIG, [(id, signature, group), ...])), one per group
    assert len(sigs) == len({neardup_beam.sig_group(i, 4) for i in ids}) and {tag for _, (tag, _) in sigs} == {neardup_beam.SIG}
    signed = sorted((doc_id, key, group) for key, (_, chunk) in sigs for doc_id, _, group in chunk)
    assert signed == sorted((i, neardup_beam.sig_group(i, 4), g) for i, g in zip(ids, groups))
    records = [r for _, packed in tagged["bands"] for r in np.frombuffer(packed, neardup_bands.RECORD).tolist()]
    assert sum(len(packed) for _, packed in tagged["bands"]) == 16 * 3 * bands
    assert sorted(doc_id for _, doc_id in records) == sorted(ids * bands)
    chunks = tagged[neardup_beam.DOCS_OUT]
    assert len(chunks) == len(set(groups)) and all(tag == neardup_beam.DOCS for _, (tag, _) in chunks)
    assert sorted(d for _, (_, packed) in chunks for d in outputs.unpack_chunk(packed)) == sorted(docs)


def test_a_signature_group_gives_each_pair_end_its_signature_from_any_of_its_chunks():
    """SignPairs reads a signature group's chunks and pair ends, in any order, and sends each end's
    (id, group, signature) to its pair; an end without a signature is a bug upstream, said so."""
    sig = {i: bytes([i]) * 4 for i in (1, 2, 5)}
    values = [(neardup_beam.PAIR, 1, 9), (neardup_beam.SIG, [(1, sig[1], 3), (2, sig[2], 3)]),
              (neardup_beam.PAIR, 2, 1), (neardup_beam.SIG, [(5, sig[5], 0)]), (neardup_beam.PAIR, 5, 1)]
    assert sorted(neardup_beam._signed_pairs(7, values)) == [
        ((1, 2), (2, 3, sig[2])), ((1, 5), (5, 0, sig[5])), ((1, 9), (1, 3, sig[1]))]
    with pytest.raises(ValueError, match="no signature"):
        list(neardup_beam._signed_pairs(7, [(neardup_beam.PAIR, 4, 1), (neardup_beam.SIG, [(5, sig[5], 0)])]))


def test_signatures_sent_one_at_a_time_by_a_tiny_budget_drop_the_same(tmp_path, monkeypatch):
    """The signatures wait in chunks up to a budget (``SIG_BUDGET``); at one byte each goes alone,
    and the drops are still the exact method's."""
    monkeypatch.setattr(neardup_beam, "SIG_BUDGET", 1)
    docs, _ = _planted(bases=30, copies=10)
    exact = neardup.find_near_duplicates(docs, 0.7, seed=0)
    dropped, kept, _ = _stages(docs, 0.7, tmp_path)
    assert dropped == exact and len(exact) >= 10


def test_the_warning_for_a_cluster_that_did_not_settle_names_the_document_id(caplog):
    """The corpus job's nodes carry their group, ``(id, group)``; the warning names the id."""
    marks = neardup_beam._Marks(rounds=2)
    marks.setup()
    with caplog.at_level("WARNING", logger=neardup_beam.__name__):
        out = list(marks.process(((5 << neardup_beam.LINE_BITS | 7, 3), [(1, 0), (9 << neardup_beam.LINE_BITS, 2)])))
    assert (5 << neardup_beam.LINE_BITS | 7, 3) == out[-1][0]  # marked for its smallest neighbour
    assert f"(document id {5 << neardup_beam.LINE_BITS | 7})" in caplog.text


def test_short_bucket_keys_give_the_pairs_of_the_bands_themselves():
    """Buckets keyed by the band's index and its rows (no hash, so no collision) give the same
    candidate pairs as the 7-byte keys on the planted set: the key's hash adds none."""
    docs, _ = _planted()
    bands, rows = neardup.bands_rows(0.7)
    perms = neardup.permutations(0, bands * rows)
    hashed, exact = {}, {}
    for key, text in docs.items():
        sig = neardup.signature(text, perms)
        for i, bucket in enumerate(neardup.band_keys(sig, bands, rows)):
            hashed.setdefault(bucket, []).append(key)
            exact.setdefault((i, sig[i * rows : (i + 1) * rows].tobytes()), []).append(key)

    def pairs(buckets):
        return {p for ids in buckets.values() for p in neardup.bucket_candidates(ids, neardup.CHAIN_LIMIT)}

    assert len(hashed) == len(exact)
    assert pairs(hashed) == pairs(exact) and len(pairs(exact)) > 40


def test_union_find_keeps_the_smallest_key_per_cluster_in_any_edge_order():
    edges = [(("b", 1), ("c", 1)), (("a", 5), ("b", 1)), (("x", 1), ("y", 1)), (("c", 1), ("d", 1))]
    expected = {("b", 1): ("a", 5), ("c", 1): ("a", 5), ("d", 1): ("a", 5), ("y", 1): ("x", 1)}
    rng = np.random.default_rng(0)
    for _ in range(5):
        order = [edges[i] for i in rng.permutation(len(edges))]
        flipped = [(b, a) if rng.random() < 0.5 else (a, b) for a, b in order]
        assert neardup.cluster_drops(flipped) == expected


def test_candidates_are_verified_by_estimated_jaccard():
    perms = neardup.permutations(seed=0)
    members = [(k, neardup.sig_bytes(neardup.signature(t, perms))) for k, t in ((1, A), (2, B), (3, C))]
    assert neardup.verified_edges(members, 0.8) == [(1, 2)]  # (1, 3), (2, 3) are candidates, not edges
    big = [(i, members[0][1]) for i in range(neardup.MAX_BUCKET_PAIRS + 10)]
    assert len(neardup.candidate_pairs(big)) == len(big) - 1  # star, not quadratic


def test_shingles_are_every_character_5_gram_spaces_ignored():
    # n characters give n - 4 shingles: the last one counts (a change at the end of a text moves
    # its Jaccard); fewer than 5 characters give the text itself as one shingle
    assert len(neardup.shingles("abcdef")) == 2
    assert len(neardup.shingles("ab cd ef")) == 2  # spaces are dropped before cutting
    assert len(neardup.shingles("abcde")) == len(neardup.shingles("ab")) == 1
    assert neardup.jaccard("abcdefgh", "abcdefgX") == pytest.approx(3 / 5)


def test_an_edge_is_made_where_the_estimate_reaches_the_threshold():
    # "reaches": an estimate equal to the threshold verifies (identical signatures at threshold 1.0)
    sig = neardup.sig_bytes(neardup.signature(A, neardup.permutations(0)))
    assert neardup.estimated_jaccard(sig, sig) == 1.0
    assert neardup.verified_edges([(("s", 1), sig), (("s", 2), sig)], 1.0) == [(("s", 1), ("s", 2))]


def test_bucket_links_are_the_chain_and_the_star_around_the_smallest():
    # every member is checked against the copy that would survive (the star) and its neighbour (the chain)
    assert neardup.bucket_links([4, 2, 3, 1, 3]) == [(1, 2), (1, 3), (1, 4), (2, 3), (3, 4)]
    assert neardup.bucket_links([2, 1]) == [(1, 2)]


def test_signatures_keep_8_bits_a_value_and_the_estimate_takes_chance_agreement_out():
    perms = neardup.permutations(seed=0, num_perm=121)
    rng = np.random.default_rng(1)
    syllables = [chr(c) for c in range(0xAC00, 0xAC00 + 2000)]
    texts = ["".join(rng.choice(syllables, size=40)) for _ in range(400)]  # unrelated: Jaccard about 0
    sigs = [neardup.signature(t, perms) for t in texts]
    assert len(neardup.sig_bytes(sigs[0])) == 121  # one byte a value (32 bits: 484)
    assert neardup.estimated_jaccard(neardup.sig_bytes(sigs[0]), neardup.sig_bytes(sigs[0])) == 1.0
    pairs = [(neardup.sig_bytes(a), neardup.sig_bytes(b)) for a, b in zip(sigs[::2], sigs[1::2])]
    raw = np.mean([(np.frombuffer(a, np.uint8) == np.frombuffer(b, np.uint8)).mean() for a, b in pairs])
    assert raw > 0.002  # 8-bit values of unrelated documents agree by chance about 1/256 of the time
    assert abs(np.mean([neardup.estimated_jaccard(a, b) for a, b in pairs])) < 0.001  # taken out: unbiased
    # at a near duplicate's similarity the 8-bit estimate is the 32-bit one within a few hundredths
    near = [t[:-4] + "".join(rng.choice(syllables, size=4)) for t in texts[:50]]
    for t, n in zip(texts, near):
        a, b = neardup.signature(t, perms), neardup.signature(n, perms)
        full = neardup.estimated_jaccard(neardup.sig_bytes(a, 32), neardup.sig_bytes(b, 32), 32)
        assert abs(neardup.estimated_jaccard(neardup.sig_bytes(a), neardup.sig_bytes(b)) - full) < 0.05


def _planted(seed: int = 0, bases: int = 200, copies: int = 60):
    """Random Korean-syllable documents (30 words) plus, per chosen base, a *near duplicate* (one
    word replaced and one appended: Jaccard ~0.8) and a *related* document (10 words replaced:
    Jaccard ~0.3, same topic, not a duplicate). Truth is what was planted."""
    rng = np.random.default_rng(seed)
    syllables = [chr(c) for c in range(0xAC00, 0xAC00 + 2000)]

    def word():
        return "".join(rng.choice(syllables, size=rng.integers(2, 5)))

    def edit(words, n):
        words = list(words)
        for pos in rng.choice(len(words), size=n, replace=False):
            words[pos] = word()
        return words

    docs = {("base", i): " ".join(word() for _ in range(30)) for i in range(bases)}
    planted = set()
    for j in range(copies):
        words = docs[("base", j)].split()
        docs[("near", j)] = " ".join(edit(words, 1) + [word()])
        docs[("related", j)] = " ".join(edit(words, 10))
        planted.add(("near", j))
    return docs, planted


def test_near_dup_precision_and_recall_on_a_planted_set():
    threshold = 0.7
    docs, planted = _planted()
    for j in range(60):  # the planted set is what it claims to be
        assert neardup.jaccard(docs[("base", j)], docs[("near", j)]) >= 0.75
        assert neardup.jaccard(docs[("base", j)], docs[("related", j)]) <= 0.5
    predicted = neardup.find_near_duplicates(docs, threshold, seed=0)
    hits = len(set(predicted) & planted)
    precision, recall = hits / max(len(predicted), 1), hits / len(planted)
    print(f"near-dup planted set: {len(planted)} planted, {len(predicted)} dropped, precision {precision:.3f}, recall {recall:.3f}")
    assert precision >= 0.95 and recall >= 0.9, (precision, recall)
    assert all(predicted[k] == ("base", k[1]) for k in set(predicted) & planted)  # the base survives


# ---------------------------------------------------------------- the Beam stages


def _chain(seed: int, length: int, words: int = 40, step: int = 3) -> dict:
    """Documents each ``step`` words away from the previous one (a sliding edit), so neighbours are
    near duplicates and the ends are not."""
    rng = np.random.default_rng(seed)
    syllables = [chr(c) for c in range(0xAC00, 0xAC00 + 2000)]
    current = ["".join(rng.choice(syllables, size=3)) for _ in range(words)]
    docs = {}
    for i in range(length):
        docs[("chain", i)] = " ".join(current)
        current = current[:]
        for pos in range(i * step, (i + 1) * step):
            current[pos % words] = "".join(rng.choice(syllables, size=3))
    return docs


def _stages(texts: dict, threshold: float, tmp_path, workers: int = 1, probe: bool = False,
            chain_limit: int = neardup.CHAIN_LIMIT, tallies: dict | None = None):
    """NearDedup alone on ``{(source, line): text}``: ({dropped: kept}, kept keys, {step: largest element});
    ``tallies``, when given, receives the summed ``near_dup`` tallies."""
    out = tmp_path / f"out-{workers}-{len(texts)}.json"
    # keys that put 20 documents in each group, in lists of one group each, as the corpus job's
    # dedup groups are (its text keys' groups, about dedup_group_bytes each)
    docs = [((i // 20).to_bytes(4, "big"), {"source": s, "line": line, "text": t})
            for i, ((s, line), t) in enumerate(sorted(texts.items()))]
    lists = [docs[i : i + 20] for i in range(0, len(docs), 20)]
    groups = -(-len(docs) // 20)
    args = [f"--direct_num_workers={workers}"] + (["--direct_running_mode=multi_processing"] if workers > 1 else [])
    # kolectra's local runner, as a corpus job's: Beam's DirectRunner tried Prism first (a download; its
    # job server's folders left in the temporary folder each time) before falling back to the FnApiRunner
    p = beam.Pipeline(options=runners.pipeline_options(args))
    near = p | beam.Create(lists) | "NearDedup" >> neardup_beam.NearDedup(threshold, 0, {s for s, _ in texts},
                                                                           chain_limit=chain_limit, groups=groups)
    kept = near.docs | "KeptKeys" >> beam.FlatMap(lambda docs: [["kept", d["source"], d["line"]] for _, d in docs])
    drops = near[neardup_beam.SAMPLES] | "Drops" >> beam.Map(lambda rd: ["drop", rd[1]["source"], rd[1]["line"], rd[1]["kept"]])
    _ = ((kept, drops) | beam.Flatten() | beam.combiners.ToList()
         | beam.Map(lambda rows: out.write_text(json.dumps(sorted(rows), ensure_ascii=False))))
    if tallies is not None:
        tally_file = tmp_path / f"tally-{workers}-{len(texts)}.json"
        _ = (near[neardup_beam.TALLY] | "SumTallies" >> beam.CombinePerKey(sum) | "AllTallies" >> beam.combiners.ToList()
             | "WriteTallies" >> beam.Map(lambda t: tally_file.write_text(json.dumps(t))))
    if probe:
        element_sizes.attach(p, "NearDedup")
    result = p.run()
    result.wait_until_finish()
    rows = json.loads(out.read_text())
    if tallies is not None:
        tallies.update({tuple(k)[1]: n for k, n in json.loads(tally_file.read_text()) if k[0] == "near_dup"})
    dropped = {(r[1], r[2]): tuple(r[3]) for r in rows if r[0] == "drop"}
    return dropped, sorted((r[1], r[2]) for r in rows if r[0] == "kept"), (element_sizes.largest(result) if probe else {})


def test_stages_drop_what_the_exact_method_drops(tmp_path):
    docs, _ = _planted(bases=120, copies=40)
    docs.update(_chain(seed=3, length=5))
    exact = neardup.find_near_duplicates(docs, 0.7, seed=0)
    assert sum(k[0] == "chain" for k in exact) == 4  # the chain is one cluster
    dropped, kept, _ = _stages(docs, 0.7, tmp_path)
    assert dropped == exact
    assert kept == sorted(set(docs) - set(exact))
    assert neardup.find_near_duplicates_staged(docs, 0.7, seed=0) == (exact, 0)


def _near_dup_fn_payloads(names: int) -> dict:
    """The pickled DoFn of every NearDedup step, as the corpus job builds it (the sources' ranks a
    PCollection from its listing), for ``names`` input files."""
    p = beam.Pipeline()
    ranked = p | "Listing" >> beam.Create([(i, f"crawl/part-{i:06d}.jsonl.gz") for i in range(names)])
    _ = p | beam.Create([]) | "NearDedup" >> neardup_beam.NearDedup(0.8, 0, ranked)
    return {t.unique_name: len(t.spec.payload) for t in p.to_runner_api().components.transforms.values()
            if t.unique_name.startswith("NearDedup/") and t.spec.urn == "beam:transform:pardo:v1"}


def test_no_near_dup_step_holds_a_table_of_the_input_files():
    """What each worker unpickles for a step is the same at 10 and 5,000 input files (a table of
    the sources in the steps took 16 MB a step at 100,000: docs/scale.md)."""
    few, many = _near_dup_fn_payloads(10), _near_dup_fn_payloads(5000)
    assert few.keys() == many.keys() and {"NearDedup/MinHash/ParDo(_Sign)", "NearDedup/KeepUnmarked/ParDo(_KeepUnmarked)"} <= few.keys()
    assert max(many.values()) < 4000
    assert {k: many[k] - few[k] for k in few if many[k] != few[k]} == {}


def test_steps_that_remember_few_sources_drop_the_same(tmp_path, monkeypatch):
    """The steps keep at most ``MEMO`` of the sources they looked up: with 2, over 4 sources, the
    drops and kept copies are the exact method's."""
    monkeypatch.setattr(neardup_beam._Ranked, "MEMO", 2)
    docs, _ = _planted(bases=40, copies=15)
    docs.update(_chain(seed=3, length=5))
    docs.update({("z-last", i): t for i, t in enumerate(list(docs.values())[:10])})
    exact = neardup.find_near_duplicates(docs, 0.7, seed=0)
    dropped, kept, _ = _stages(docs, 0.7, tmp_path)
    assert dropped == exact and any(k[0] == "z-last" for k in exact)


def test_a_chain_of_near_duplicates_is_one_cluster_kept_at_its_start(tmp_path):
    docs = _chain(seed=3, length=5)
    perms = neardup.permutations(0)
    sig = {k: neardup.sig_bytes(neardup.signature(t, perms)) for k, t in docs.items()}
    assert all(neardup.estimated_jaccard(sig[("chain", i)], sig[("chain", i + 1)]) >= 0.7 for i in range(4))
    assert neardup.estimated_jaccard(sig[("chain", 0)], sig[("chain", 4)]) < 0.5  # the ends are not near
    dropped, kept, _ = _stages(docs, 0.7, tmp_path)
    assert kept == [("chain", 0)] and dropped == {("chain", i): ("chain", 0) for i in range(1, 5)}


def test_components_in_rounds_match_union_find_and_stay_conservative_when_short():
    rng = random.Random(0)
    for n in (10, 100, 1000):
        edges = [(rng.randrange(n), rng.randrange(n)) for _ in range(n)]
        edges = [e for e in edges if e[0] != e[1]]
        assert neardup.star_rounds(edges, neardup_beam.ROUNDS) == (neardup.cluster_drops(edges), 0)
    path = [(i, i + 1) for i in range(2000)]  # a sorted chain: the slowest shape to converge
    assert neardup.star_rounds(path, 12) == (neardup.cluster_drops(path), 0)
    labels = list(range(2001))
    rng.shuffle(labels)
    path = [(labels[i], labels[i + 1]) for i in range(2000)]
    short, unconverged = neardup.star_rounds(path, 3)  # too few rounds: local minima are left
    assert unconverged > 0
    assert 0 < len(short) < 2000 and set(short) < set(neardup.cluster_drops(path))  # fewer drops, none wrong
    assert all(kept < dropped for dropped, kept in short.items())


def test_no_element_grows_with_the_input(tmp_path):
    small, _ = _planted(seed=1, bases=60, copies=30)
    large, _ = _planted(seed=1, bases=240, copies=120)
    _, _, at_small = _stages(small, 0.7, tmp_path, probe=True)
    dropped, _, at_large = _stages(large, 0.7, tmp_path, probe=True)
    assert len(dropped) >= 110 and set(at_small) == set(at_large)
    assert "NearDedup/MinHash" in at_large and "NearDedup/Components/MarkGroups" in at_large
    assert max(at_large.values()) <= 1.25 * max(at_small.values()), (at_small, at_large)
    assert at_large["NearDedup/MinHash"] < 1024  # packed band records of a coarse key: 16 bytes each
    assert at_large["NearDedup/JoinMarks"] < 1.25 * at_small["NearDedup/JoinMarks"]  # a group: its documents


def test_one_and_two_workers_drop_the_same(tmp_path):
    docs, _ = _planted(seed=2, bases=80, copies=40)
    docs.update(_chain(seed=3, length=4))
    one = _stages(docs, 0.7, tmp_path, workers=1)
    assert one == _stages(docs, 0.7, tmp_path, workers=2)
    assert len(one[0]) >= 40


def test_beam_rounds_are_the_in_memory_rounds_and_count_what_did_not_converge(tmp_path):
    labels = list(range(301))
    random.Random(1).shuffle(labels)
    path = [(labels[i], labels[i + 1]) for i in range(300)]
    expected, unconverged = neardup.star_rounds(path, 2)
    assert unconverged > 0
    out = tmp_path / "marks.json"
    p = beam.Pipeline(options=runners.pipeline_options(["--direct_num_workers=1"]))
    tallied = tmp_path / "tally.json"
    components = p | beam.Create(path) | "Components" >> neardup_beam.StarComponents(rounds=2)
    _ = components.marks | beam.combiners.ToList() | beam.Map(lambda marks: out.write_text(json.dumps(sorted(marks))))
    _ = (components[neardup_beam.TALLY] | "Sum" >> beam.CombinePerKey(sum) | "Tallies" >> beam.combiners.ToList()
         | beam.Map(lambda t: tallied.write_text(json.dumps(t))))
    result = p.run()
    result.wait_until_finish()
    assert {d: k for d, k in json.loads(out.read_text())} == expected
    counters = result.metrics().query(beam.metrics.MetricsFilter().with_name("unconverged_nodes"))["counters"]
    assert sum(c.committed for c in counters) == unconverged
    assert json.loads(tallied.read_text()) == [[["near_dup", "unconverged_nodes"], unconverged]]  # for stats.json
