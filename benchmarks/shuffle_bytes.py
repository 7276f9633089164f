"""Benchmark of the bytes every shuffle of kolectra's Beam jobs carries: the corpus job
(``corpus/build.py``, with near-dup's stages under ``--preset production``), the vocab stage's word
count (``vocab/count.py``) and the examples job (``corpus/examples_beam.py``) on the first 1 and 2
NSMC review files (as ``benchmarks/scale.py`` chains them: a WordPiece vocab trained on the first
file, one in-process worker).

What is measured, for each GroupByKey (a CoGroupByKey, a Combine and a Distinct each hold one):
its input's element count and the bytes of its elements encoded with the coder the runner uses
for that PCollection, taken from the pipeline proto Beam hands the runner (``to_runner_api``, so
after Beam coerces a GroupByKey's input to a key-value type with a deterministic key coder):
``encode_nested``, the form an element has inside Beam's windowed value on the wire, counted
exactly for every element by a probe step beside the shuffle. Beam's windowed-value framing (the
timestamp, the global window, the pane) adds :func:`framing_bytes` an element on top. A pickled
size is not used: the coders write Python's primitives in their own format (``FastPrimitivesCoder``
pickles only what it does not know) and length-prefix them.

Combiners: these figures are the Combine's input *before* lifting, what the shuffle carries on a
runner that does not lift (an upper bound). Runners that lift (FnApiRunner, Dataflow) shuffle one
accumulator per key and bundle instead; for those the FnApiRunner's own metrics are reported
beside (``lifted``): the Precombine output's exact element count and its bytes estimated from
Beam's ``beam:metric:sampled_byte_size:v1``, which encodes a sample of the elements (the first 10
of a bundle, then about 10/N of them: ``runners/worker/opcounters.py``), so count x sampled mean.
How close that estimate is gets checked against the exact probes on every unlifted shuffle
(``sampled_over_exact``). Bundling decides how much lifting saves, so the lifted figures are this
runner's with one worker, not Dataflow's.

    python benchmarks/shuffle_bytes.py [--quick] [--preset production] [--reviews GLOB | --data DIR]

Full: 1 and 2 of the review files, 5 CPU minutes (default preset) to 7 (production), 1.3 GB peak
RSS; ``--quick``: the first 2,000 and 4,000 lines of the first file, about 35 CPU s. value: the
corpus job's shuffle MB per MB of cleaned text at the largest size (encoded and framed, before
lifting); baseline: docs/scale.md's estimate for it before this measurement (6.5). Figures:
docs/scale.md.
"""

from __future__ import annotations

import contextlib
import glob
import gzip
import json
import sys
import tempfile
from pathlib import Path

import apache_beam as beam
from apache_beam.coders.coders import BytesCoder, GlobalWindowCoder, WindowedValueCoder
from apache_beam.metrics import monitoring_infos
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.pipeline import PipelineVisitor
from apache_beam.runners import pipeline_context
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.windowed_value import WindowedValue

WHO = "benchmarks/shuffle_bytes.py"
NAMESPACE = "shuffle_bytes"
ESTIMATE_BEFORE = 6.5  # docs/scale.md before this benchmark: GB of shuffle per GB of text, from element sizes


class _Encoded(beam.DoFn):
    """Counts its input's elements and their encoded bytes in a Beam metrics distribution."""

    def __init__(self, name: str, coder: beam.coders.Coder):
        self.name, self.coder = name, coder

    def setup(self):
        self._impl = self.coder.get_impl()
        self._sizes = beam.metrics.Metrics.distribution(NAMESPACE, self.name)

    def process(self, element):
        self._sizes.update(len(self._impl.encode_nested(element)))


def framing_bytes() -> int:
    """Bytes Beam's windowed value adds around an element in the global window (its timestamp,
    window list and pane): the same for every element of a batch job, whatever its coder."""
    coder = BytesCoder()
    framed = WindowedValueCoder(coder, GlobalWindowCoder()).encode(WindowedValue(b"", 0, (GlobalWindow(),)))
    return len(framed) - len(coder.get_impl().encode_nested(b""))


def _combine_of(node) -> str | None:
    """The full label of the CombinePerKey a GroupByKey belongs to (a runner may lift it), or None."""
    while node is not None and node.transform is not None:
        if isinstance(node.transform, beam.CombinePerKey):
            return node.full_label
        node = node.parent
    return None


def attach(p: beam.Pipeline) -> dict[str, dict]:
    """Hang a probe beside every GroupByKey of ``p`` (before it runs) that counts its input's
    elements and their bytes in the runner's coder; returns ``{shuffle: {pcollection, combine,
    coder}}`` for :func:`collect`."""
    ctx = pipeline_context.PipelineContext()
    proto = p.to_runner_api(context=ctx)
    found: dict[str, dict] = {}

    class Shuffles(PipelineVisitor):
        def visit_transform(self, node):
            if isinstance(node.transform, beam.GroupByKey):
                pc = node.inputs[0]
                pcoll = proto.components.pcollections[ctx.pcollections.get_id(pc)]
                found[node.full_label] = {"pc": pc, "pcollection": pcoll.unique_name, "combine": _combine_of(node),
                                          "coder": ctx.coders.get_by_id(pcoll.coder_id)}

    p.visit(Shuffles())
    for name, f in found.items():
        _ = f["pc"] | f"ShuffleBytes {name}" >> beam.ParDo(_Encoded(name, f["coder"]))
    return found


def _runner_metrics(result, names: dict[str, str]) -> dict[str, dict]:
    """``{pcollection unique name: {elements, sampled: (count, sum)}}`` from the FnApiRunner's
    monitoring infos (per-PCollection element counts and sampled encoded sizes)."""
    out: dict[str, dict] = {}
    for mi in result.monitoring_infos():
        pid = mi.labels.get("PCOLLECTION")
        if pid is None or pid not in names:
            continue
        row = out.setdefault(names[pid], {"elements": 0, "sampled": [0, 0]})
        if mi.urn == monitoring_infos.ELEMENT_COUNT_URN:
            row["elements"] += monitoring_infos.extract_counter_value(mi)
        elif mi.urn == monitoring_infos.SAMPLED_BYTE_SIZE_URN:
            count, total, _, _ = monitoring_infos.extract_distribution(mi)
            row["sampled"][0] += count
            row["sampled"][1] += total
    return out


def collect(result, found: dict[str, dict], names: dict[str, str]) -> dict[str, dict]:
    """Per shuffle: ``elements``, ``bytes`` (exact, encoded), ``framing`` (Beam's windowed-value
    bytes on top, all elements), the runner's sampled estimate of the same PCollection and, for a
    Combine the runner lifted, its Precombine output (``lifted``)."""
    query = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))
    exact = {d.key.metric.name: d.committed for d in query["distributions"]}
    runner = _runner_metrics(result, names)
    rows = {}
    for name, f in found.items():
        d = exact.get(name)
        n, size = (d.count, d.sum) if d is not None else (0, 0)
        seen = runner.get(f["pcollection"], {})
        framing = framing_bytes() * n
        row = {"elements": n, "bytes": size, "framing": framing, "largest": d.max if n else 0,
               "combine": f["combine"]}
        if seen.get("sampled", [0])[0]:
            sampled_mean = seen["sampled"][1] / seen["sampled"][0]
            row["sampled_estimate"] = round(seen["elements"] * sampled_mean)
            row["runner_elements"] = seen["elements"]
        if f["combine"]:
            lifted = runner.get(f["combine"] + "/Precombine.out")
            if lifted and lifted["sampled"][0]:
                row["lifted"] = {"elements": lifted["elements"],
                                 "bytes_sampled": round(lifted["elements"] * lifted["sampled"][1] / lifted["sampled"][0])}
        rows[name] = row
    return rows


@contextlib.contextmanager
def recording():
    """Within it, every Beam pipeline run in this process is probed (:func:`attach`) and its
    shuffles' figures appended to the yielded list, one dict per run."""
    runs: list[dict[str, dict]] = []
    names: dict[str, str] = {}
    run, create_stages = beam.Pipeline.run, FnApiRunner.create_stages

    def probed_run(self, *args, **kwargs):
        if getattr(self, "_shuffle_probed", False):
            return run(self, *args, **kwargs)
        self._shuffle_probed = True
        found = attach(self)
        result = run(self, *args, **kwargs)
        result.wait_until_finish()
        runs.append(collect(result, found, names))
        return result

    def named_stages(self, pipeline_proto):
        stage_context, stages = create_stages(self, pipeline_proto)
        names.update({pid: pc.unique_name for pid, pc in stage_context.components.pcollections.items()})
        return stage_context, stages

    beam.Pipeline.run, FnApiRunner.create_stages = probed_run, named_stages
    try:
        yield runs
    finally:
        beam.Pipeline.run, FnApiRunner.create_stages = run, create_stages


# ---------------------------------------------------------------- the chain on the reviews


def cleaned_text_mb(corpus: Path) -> float:
    """MB of the documents' UTF-8 text in the corpus's shards, both splits: the text after cleaning."""
    from kolectra.corpus.shards import SPLITS, shard_paths

    total = 0
    for split in SPLITS:
        for path in shard_paths(corpus, split):
            with gzip.open(path, "rt", encoding="utf-8") as f:
                total += sum(len(json.loads(line)["text"].encode("utf-8")) for line in f)
    return total / 1e6


def summed(shuffles: dict[str, dict]) -> dict:
    """A job's totals: unlifted bytes (with and without Beam's framing) and lifted where measured."""
    lifted = sum(r["lifted"]["bytes_sampled"] if "lifted" in r else r["bytes"] + r["framing"] for r in shuffles.values())
    return {"elements": sum(r["elements"] for r in shuffles.values()), "bytes": sum(r["bytes"] for r in shuffles.values()),
            "framed": sum(r["bytes"] + r["framing"] for r in shuffles.values()), "framed_lifted": lifted}


def measure_chain(files: list[str], preset: str, vocab: Path, tmp: Path, shard_mb: float) -> dict:
    """The corpus job on ``files``, then the word count and the examples job on its corpus, each
    probed: ``{job: {cpu_s, shuffles, total}}`` and the text's size before and after cleaning."""
    import scale  # noqa: PLC0415 - the scale benchmark's chain, reused as it runs it
    from common import cpu_seconds  # noqa: PLC0415

    from kolectra.corpus.shards import shard_paths
    from kolectra.vocab import count
    from kolectra.vocab.config import VocabConfig

    corpus, vcfg, row = tmp / f"corpus-{preset}-{len(files)}", VocabConfig(), {}
    jobs = {
        "corpus": lambda: scale.child_corpus(files, corpus, shard_mb, preset),
        "vocab_count": lambda: count.count_split([str(q) for q in shard_paths(corpus, "train")], vcfg.max_word_types,
                                                 vcfg.count_flush_types, ["--direct_num_workers=1"]),
        "examples": lambda: scale.child_examples(corpus, vocab, tmp / f"examples-{preset}-{len(files)}"),
    }
    for job, run in jobs.items():
        with recording() as runs:
            c0 = cpu_seconds()
            run()
            cpu = cpu_seconds() - c0
        shuffles = {k: v for r in runs for k, v in r.items()}
        row[job] = {"cpu_s": round(cpu, 1), "shuffles": shuffles, "total": summed(shuffles)}
        print(f"{WHO}: {preset} {len(files)} file(s) {job}: {json.dumps(row[job]['total'])} ({cpu:.0f} CPU s)",
              file=sys.stderr)
    row["input_text_mb"] = round(sum(scale.text_mb(f) for f in files), 3)
    row["cleaned_text_mb"] = round(cleaned_text_mb(corpus), 3)
    return row


def quick_inputs(first: str, where: Path) -> list[list[str]]:
    """--quick: the first 2,000 and 4,000 lines of the first review file, as files of 2,000 lines."""
    with gzip.open(first, "rt", encoding="utf-8") as f:
        lines = [line for _, line in zip(range(4000), f)]
    parts = []
    for i in range(2):
        path = where / f"part-{i}.jsonl.gz"
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.writelines(lines[i * 2000:(i + 1) * 2000])
        parts.append(str(path))
    return [parts[:1], parts]


def per_mb(row: dict) -> dict:
    mb = row["cleaned_text_mb"]
    return {job: {k: round(v / 1e6 / mb, 3) for k, v in row[job]["total"].items() if k != "elements"}
            for job in ("corpus", "vocab_count", "examples")}


def sampling_check(rows: list[dict], least: int = 1000) -> dict[str, float]:
    """Beam's sampled estimate over the exact framed bytes, for every shuffle of at least ``least``
    elements: how far ``beam:metric:sampled_byte_size:v1`` alone would have been off."""
    out = {}
    for row in rows:
        for job in ("corpus", "vocab_count", "examples"):
            for name, r in row[job]["shuffles"].items():
                if r["elements"] >= least and "sampled_estimate" in r:
                    out[f"{row['files']} file(s) {job} {name}"] = round(r["sampled_estimate"] / (r["bytes"] + r["framing"]), 4)
    return out


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from common import add_data_args, emit, parser, reviews_source  # noqa: PLC0415
    from scale import train_vocab  # noqa: PLC0415

    p = parser(__doc__, "1 and 2 review files, 5-7 CPU minutes")
    add_data_args(p, "reviews")
    p.add_argument("--preset", choices=("default", "production"), default="default",
                   help="the corpus job's preset (production: near-dup on)")
    p.add_argument("--sizes", default="1,2", help="review files per run, comma-separated (default 1,2)")
    p.add_argument("--shard-mb", type=float, default=16.0, help="the corpus's shard_bytes in MB, as benchmarks/scale.py")
    args = p.parse_args()
    files = sorted(glob.glob(reviews_source(args, WHO)))
    with tempfile.TemporaryDirectory(prefix="kolectra-shuffle-") as tmp:
        tmp = Path(tmp)
        sizes = [int(s) for s in args.sizes.split(",")]
        inputs = quick_inputs(files[0], tmp) if args.quick else [files[:n] for n in sizes]
        vocab = train_vocab(inputs[0][0], tmp / "vocab")
        rows = []
        for chosen in inputs:
            row = {"files": len(chosen), **measure_chain(chosen, args.preset, vocab, tmp, args.shard_mb)}
            row["per_mb_of_cleaned_text"] = per_mb(row)
            rows.append(row)
            print(f"{WHO}: {json.dumps({k: row[k] for k in ('files', 'input_text_mb', 'cleaned_text_mb', 'per_mb_of_cleaned_text')})}",
                  file=sys.stderr)
    value = rows[-1]["per_mb_of_cleaned_text"]["corpus"]["framed"]
    growth = None
    if len(rows) > 1:
        growth = {job: round(rows[-1][job]["total"]["bytes"] / max(rows[0][job]["total"]["bytes"], 1), 3)
                  for job in ("corpus", "vocab_count", "examples")}
        growth["cleaned_text"] = round(rows[-1]["cleaned_text_mb"] / rows[0]["cleaned_text_mb"], 3)
    emit("shuffle_bytes", "MB shuffled by the corpus job (encoded and framed, before lifting) per MB of cleaned text",
         value, "docs/scale.md's estimate from element sizes", ESTIMATE_BEFORE,
         {"preset": args.preset, "quick": args.quick, "shard_mb": args.shard_mb, "framing_bytes": framing_bytes(),
          "growth_largest_over_smallest": growth, "sampled_over_exact": sampling_check(rows), "rows": rows})


if __name__ == "__main__":
    main()
