"""The largest element each step of a Beam pipeline emits, in pickled bytes: what a worker must hold
at once for one element, whatever else it streams. Used by ``benchmarks/neardup.py`` and
``tests/test_corpus_neardup.py``.

:func:`attach` hangs a probe on every output of the steps of kolectra's transforms under a label
(before the pipeline runs); each probe records its elements' sizes in a Beam metrics distribution,
read back by :func:`largest` from the run's result. A grouped value (a GroupByKey's iterable, a
CoGroupByKey's dict of iterables) is measured as the list it holds, since a runner may hand it to
the next step whole.
"""

from __future__ import annotations

import pickle

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.pipeline import PipelineVisitor

NAMESPACE = "element_bytes"
_PLAIN = (str, bytes, int, float, list, tuple, dict, type(None))


def _held(value):
    if isinstance(value, dict):
        return {k: _held(v) for k, v in value.items()}
    if not isinstance(value, _PLAIN) and hasattr(value, "__iter__"):
        return list(value)
    return value


def pickled_size(element) -> int:
    if isinstance(element, tuple):
        element = tuple(_held(v) for v in element)
    return len(pickle.dumps(element, protocol=pickle.HIGHEST_PROTOCOL))


def _record(element, name: str) -> None:
    beam.metrics.Metrics.distribution(NAMESPACE, name).update(pickled_size(element))


def attach(p: beam.Pipeline, prefix: str) -> list[str]:
    """Probe the outputs of the steps under ``prefix`` that kolectra's own transforms apply (a
    library transform's inner steps may be rewritten by the runner, a combiner lifted); returns
    the probed outputs' names."""
    found: dict[int, tuple[str, beam.PCollection]] = {}

    def probe(node):
        parent = node.parent.transform if node.parent else None
        if node.full_label.startswith(prefix) and type(parent).__module__.startswith("kolectra."):
            for tag, pc in node.outputs.items():
                name = node.full_label if tag is None else f"{node.full_label}[{tag}]"
                found.setdefault(id(pc), (name, pc))

    class Outputs(PipelineVisitor):
        def visit_transform(self, node):
            probe(node)

        def enter_composite_transform(self, node):
            probe(node)

    p.visit(Outputs())
    for name, pc in found.values():
        _ = pc | f"SizeOf {name}" >> beam.Map(_record, name)
    return sorted(name for name, _ in found.values())


def largest(result) -> dict[str, int]:
    """``{output: largest element in pickled bytes}`` from a finished run's metrics."""
    query = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))
    return {d.key.metric.name: d.committed.max for d in query["distributions"] if d.committed and d.committed.count}
