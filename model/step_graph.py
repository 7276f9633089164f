"""A whole optimizer update recorded once as a CUDA graph and replayed (``train.compile_mode=whole-step``).

Where it sits: :mod:`model.train` gives :class:`StepGraph` its device step (every micro-batch's
forward and backward, the gradients averaged and clipped, AdamW, the gradients dropped; nothing
read back by the host) and calls it once per update with that update's micro-batches. The CUDA
device makes one (:meth:`model.device.CudaDevice.whole_step`); no other module records graphs.

Why: ``reduce-overhead`` replays the compiled forward and backward as CUDA graphs, but the host
still runs everything around them in Python each step: the graphs' guards and wrappers, clipping,
fused AdamW's per-tensor bookkeeping (about 400 parameter tensors at ``small`` and ``base``),
``zero_grad``. On an H200 that host work took 16.9 ms a step for ELECTRA-Small, whose kernels ran
in 10.65 ms, so the GPU waited (docs/benchmarks.md, issue 45). Recorded whole, an update costs the
host a copy per input and one replay: PyTorch's "whole-network capture" (the CUDA graphs section of
its CUDA semantics notes), as NVIDIA's MLPerf BERT submissions record their training step.

How: the first ``warmup`` calls are ordinary updates run on a side stream: they compile the step
and let cuBLAS, the allocator and AdamW's state settle, which recording would otherwise capture.
The next call is recorded (nothing runs while recording) and then replayed; every later call copies
its batches into the recorded inputs and replays. What the recorded update reads from the host
must therefore live on the device: the learning rates are device tensors set in place before each
replay (:func:`model.optim.set_lr`), AdamW is ``capturable`` (its step counts live on the device),
scheduled values come from a device step counter (:func:`model.objectives.knobs`), and random
draws come from the CUDA generator, whose offset every replay advances. The outputs (the metric
sums) are the same tensors every replay: the log adds them into its own sums before the next.

Without ``capture`` (the CPU, for tests) the same path runs: the batches go through the same
static inputs and the outputs into the same static tensors each call, so everything but the
recording itself is checked where no GPU is.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from kolectra.core.errors import KolectraError

# Ordinary updates before recording. PyTorch's notes warm up on a side stream before capture;
# three calls also cover the compiled step's first call (Dynamo, Inductor) and its backward's
# lazy compile, so neither happens while recording.
WARMUP_STEPS = 3

Micro = list[dict[str, torch.Tensor]]


class RecordingFailed(KolectraError):
    """The update could not be recorded (a host sync or a lazy initialisation inside it, no usable GPU)."""


class StepGraph:
    """``step(micro_batches) -> outputs`` (tensors in lists, tuples and dicts), called through static
    inputs and outputs; with ``capture``, recorded as one CUDA graph after ``warmup`` calls."""

    def __init__(self, step: Callable[[Micro], Any], capture: bool, warmup: int = WARMUP_STEPS):
        self.step, self.capture, self.warmup = step, capture, warmup
        self.calls = 0
        self.inputs: Micro | None = None
        self.outputs: Any = None
        self.graph: torch.cuda.CUDAGraph | None = None

    def __call__(self, micro: Micro) -> Any:
        self._load(micro)
        if self.graph is not None:
            self.graph.replay()
            return self.outputs
        self.calls += 1
        if not self.capture:
            self.outputs = _into(self.outputs, self.step(self.inputs))
            return self.outputs
        if self.calls <= self.warmup:
            return self._on_side_stream()
        try:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self.outputs = self.step(self.inputs)
        except RuntimeError as e:  # CUDA's and torch's capture errors; the cause stays chained below
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise RecordingFailed(
                f"recording update {self.calls} as one CUDA graph failed ({first}): train.compile_mode="
                "reduce-overhead (CUDA's default) replays the compiled step without recording the whole update"
            ) from e
        self.graph = graph
        graph.replay()  # recording ran nothing: this is the update itself
        return self.outputs

    def _load(self, micro: Micro) -> None:
        """The batches into the static inputs (made from the first call's, same shapes after)."""
        if self.inputs is None:
            self.inputs = [{k: v.clone() for k, v in batch.items()} for batch in micro]
            return
        if len(micro) != len(self.inputs):
            raise ValueError(f"a recorded step takes {len(self.inputs)} micro-batches, got {len(micro)}")
        for static, batch in zip(self.inputs, micro):
            if static.keys() != batch.keys():
                raise ValueError(f"a recorded step's batches have {sorted(static)}, got {sorted(batch)}")
            for k, v in batch.items():
                if v.shape != static[k].shape or v.dtype != static[k].dtype:
                    raise ValueError(f"a recorded step's {k} is {tuple(static[k].shape)} {static[k].dtype}, "
                                     f"got {tuple(v.shape)} {v.dtype}: its shapes are fixed once recorded")
                static[k].copy_(v, non_blocking=True)

    def _on_side_stream(self) -> Any:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            out = self.step(self.inputs)
        torch.cuda.current_stream().wait_stream(side)
        return out


def _into(kept: Any, fresh: Any) -> Any:
    """``fresh`` (detached) copied into ``kept`` of the same structure, or kept as it is the first
    time (``kept`` None): the outputs stay the same tensors call after call, as a replayed graph's do."""
    if isinstance(fresh, torch.Tensor):
        if kept is None:
            return fresh.detach()
        with torch.no_grad():
            return kept.copy_(fresh)
    if isinstance(fresh, dict):
        if kept is not None and kept.keys() != fresh.keys():
            raise ValueError(f"a recorded step's outputs changed keys: {sorted(kept)} -> {sorted(fresh)}")
        return {k: _into(None if kept is None else kept[k], v) for k, v in fresh.items()}
    if isinstance(fresh, (list, tuple)):
        if kept is not None and len(kept) != len(fresh):
            raise ValueError(f"a recorded step's outputs changed length: {len(kept)} -> {len(fresh)}")
        return type(fresh)(_into(None if kept is None else a, b) for a, b in zip(kept or [None] * len(fresh), fresh))
    raise TypeError(f"a recorded step returns tensors in lists, tuples and dicts, not {type(fresh).__name__}")
