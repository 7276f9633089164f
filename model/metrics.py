"""Training metrics for the pretrain loop: ``metrics.jsonl`` lines and progress messages.

The objective returns additive device tensors (loss shares, counts, logit histograms; see
:mod:`model.rtd`); they are summed here over micro-steps and steps, still on the device, and read
back in ONE transfer (``Device.read_back``) only when a line is written every ``log_every``
steps, so the steps in between never wait for the device. A line holds, for the window since the previous one:

- ``loss`` and its terms (``gen_loss``, ``disc_loss`` or ``mlm_loss``, ``disc_mlm_loss`` for the
  discriminator's vocabulary head; ``mlm``, which has no generator, logs ``gen_loss`` 0, and its progress
  line leaves the generator out), ``grad_norm``, ``temperature`` (a replacement-temperature
  schedule): means per step (mlm_then_rtd: ``disc_loss`` and ``disc_mlm_loss`` over the steps of
  their own phase, left out of a window without any, with the ratios of that phase);
- ``gen_acc`` (generator argmax = original at masked slots), ``replaced_share`` (masked slots whose
  sample differs from the original), ``disc_acc`` / ``disc_precision`` / ``disc_recall`` (class
  "replaced"), ``disc_auc`` (from 8,192-bin logit histograms, :data:`model.rtd.AUC_BINS`: within 1e-4 of the exact
  AUC on a plateau's logits; the 64 bins used before read 0.002-0.035 low),
  ``mlm_acc`` for the MLM ablations (``all_tokens_mlm`` also ``input_replaced_share``: its inputs
  that are not the original), ``disc_mlm_acc`` for the discriminator's vocabulary head: ratios of
  window sums;
- ``disc_replaced_tokens`` and ``disc_original_tokens``: the tokens of each class the discriminator
  scored in the window, all ranks; the health check judges it only on windows with enough of each
  (:data:`model.health.MIN_CLASS_TOKENS`), and the progress line says when a window had too few;
- ``lr``, ``tokens_per_s`` (non-padding tokens, all ranks), ``mfu`` (useful training FLOPs per
  second over the devices' peak, when a peak figure is known) and device extras;
- ``nonpad_tokens``: the non-padding tokens the whole run has trained on up to this step, all ranks
  and every process of a resumed run (the total a checkpoint saved, plus what came after).

Values are averaged over ranks. Only rank 0 writes. It also writes every line, as scalars, with
TensorBoard's own writer (``torch.utils.tensorboard.SummaryWriter``) into ``tensorboard/`` beside
metrics.jsonl, so ``tensorboard --logdir ARTIFACT/tensorboard`` shows a run live. Tags, grouped by
prefix (:data:`TAGS`): ``loss/{total,generator,discriminator,mlm,disc_mlm}``, ``train/{lr,grad_norm}``,
``gen/{acc,replaced_share,temperature}``, ``disc/{acc,precision,recall,auc,mlm_acc,replaced_tokens,original_tokens}``, ``mlm/{acc,input_replaced_share}``,
``perf/{tokens_per_s,mfu}``, and ``device/<field>`` for the device extras (e.g.
``device/xla_compiles``); ``step`` is the event's step, its wall time the time the line was
written, and None (a NaN or inf) is left out. SummaryWriter names its file after the time, host
and process; :meth:`MetricsLog.close` renames it to the fixed ``events.out.tfevents.kolectra`` so
the artifact's file list does not depend on where it ran. The bytes still differ run to run, as
metrics.jsonl's do: both hold throughput and wall times. On resume both files keep the steps up
to the checkpoint's: the event file is rewritten from the kept lines, at the wall times the old
event file gives them.

Progress: a bar over the steps (:mod:`core.bars`), its postfix the last line's loss, lr and
throughput; without a terminal one ``[kolectra] pretrain ...`` line per written line.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
import math
import os
import threading
import time
from pathlib import Path
from typing import Iterable, Iterator

import torch
from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader
from torch.utils.tensorboard import SummaryWriter

from kolectra.core.bars import Bar
from kolectra.core.jsonl import read_lines
from kolectra.model import health as health_checks
from kolectra.model.health import LINES_READ
from kolectra.model.rtd import AUC_BINS

# Per-step quantities, averaged over the steps of a window.
MEAN_KEYS = ("loss", "gen_loss", "disc_loss", "mlm_loss", "disc_mlm_loss", "grad_norm", "temperature")
# mlm_then_rtd's phases: a loss averaged over the steps of its own phase (the sum of the phase's 0/1
# weights), and left out of a window with none; the same for the ratios of that phase.
PHASE_STEPS = {"disc_loss": "rtd_steps", "disc_mlm_loss": "mlm_steps"}
# name -> (numerator, denominator), both window sums.
RATIOS = {
    "gen_acc": ("gen_correct", "masked"),
    "replaced_share": ("replaced", "masked"),
    "disc_acc": ("disc_correct", "disc_tokens"),
    "disc_precision": ("disc_tp", "disc_pred_pos"),
    "disc_recall": ("disc_tp", "disc_replaced"),
    # the discriminator's class prior: the share of its tokens that were replaced (model.health)
    "replaced_token_share": ("disc_replaced", "disc_tokens"),
    "mlm_acc": ("mlm_correct", "mlm_tokens"),
    # all_tokens_mlm: the share of its scored inputs that are not the original (model.health)
    "input_replaced_share": ("mlm_replaced", "mlm_tokens"),
    # the discriminator's vocabulary head (hybrid, corrective, mlm_then_rtd): argmax (corrective: the
    # copy-or-head prediction) = original at the masked slots
    "disc_mlm_acc": ("disc_mlm_correct", "disc_mlm_tokens"),
}
# The metrics every objective reports (the rest depend on the objective).
METRIC_KEYS = ("loss", "gen_loss", "grad_norm")
# metrics.jsonl field -> TensorBoard tag; any other field is a device extra, tagged "device/<field>".
TAGS = {"loss": "loss/total", "gen_loss": "loss/generator", "disc_loss": "loss/discriminator", "mlm_loss": "loss/mlm",
        "disc_mlm_loss": "loss/disc_mlm", "disc_mlm_acc": "disc/mlm_acc", "temperature": "gen/temperature",
        "lr": "train/lr", "grad_norm": "train/grad_norm", "gen_acc": "gen/acc", "replaced_share": "gen/replaced_share",
        "replaced_token_share": "disc/replaced_token_share",
        "disc_acc": "disc/acc", "disc_precision": "disc/precision", "disc_recall": "disc/recall",
        "disc_auc": "disc/auc", "mlm_acc": "mlm/acc",
        "disc_replaced_tokens": "disc/replaced_tokens", "disc_original_tokens": "disc/original_tokens",
        "input_replaced_share": "mlm/input_replaced_share", "tokens_per_s": "perf/tokens_per_s", "mfu": "perf/mfu",
        "nonpad_tokens": "train/nonpad_tokens"}
EVENT_DIR = "tensorboard"  # beside metrics.jsonl
EVENT_FILE = Path(EVENT_DIR) / "events.out.tfevents.kolectra"  # the name it has once the run closes it
EVENT_GLOB = "events.out.tfevents.*"


def eta_text(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


def progress_text(line: dict) -> str:
    """What the progress bar (or line) shows of a metrics line; a NaN (None) shows as ``nan``."""
    def f(key: str, spec: str) -> str:
        v = line.get(key)
        return "nan" if v is None else format(v, spec)

    if "disc_loss" in line:
        second = (f"disc {f('disc_loss', '.4f')}, AUC {f('disc_auc', '.2f')}{_too_few(line)}, "
                  f"replaced {f('replaced_share', '.0%')}")
        second += f", disc MLM {f('disc_mlm_loss', '.3f')}" if "disc_mlm_loss" in line else ""
    elif "disc_mlm_loss" in line:
        second = f"disc MLM {f('disc_mlm_loss', '.3f')}"
    else:
        second = f"mlm {f('mlm_loss', '.3f')}"
    mfu = f" MFU {f('mfu', '.1%')}" if "mfu" in line else ""
    # mlm (BERT) has no generator: its lines' gen_loss is the 0 of a term it does not have, and "gen 0.000" read
    # as a generator that predicts every masked token; a line with a generator has its accuracy or replaced share
    gen = f"gen {f('gen_loss', '.3f')}, " if "gen_acc" in line or "replaced_share" in line else ""
    return (f"loss {f('loss', '.4f')} ({gen}{second}) lr {f('lr', '.2e')} "
            f"{f('tokens_per_s', ',.0f')} tok/s{mfu}")


def _too_few(line: dict) -> str:
    """' (3 original tokens: not judged)': a window whose discriminator scored too few tokens of a class for the
    health check (:data:`model.health.MIN_CLASS_TOKENS`), its AUC and recall swinging with a token or two."""
    counts = {name: line.get(f"disc_{name}_tokens") for name in ("original", "replaced")}
    name, n = min(((k, v) for k, v in counts.items() if isinstance(v, (int, float))), key=lambda kv: kv[1],
                  default=(None, None))
    if n is None or n >= health_checks.MIN_CLASS_TOKENS:
        return ""
    return f" ({int(n)} {name} token{'' if n == 1 else 's'}: not judged)"


def class_counts(sums: dict, ranks: int) -> dict[str, int]:
    """The tokens of each class the discriminator scored in the window, all ranks (``sums`` are the ranks'
    mean); none for a window without RTD steps (mlm_then_rtd's MLM phase)."""
    if "disc_tokens" not in sums or "disc_replaced" not in sums or sums.get("rtd_steps", 1) <= 0:
        return {}
    replaced, scored = sums["disc_replaced"] * ranks, sums["disc_tokens"] * ranks
    return {"disc_replaced_tokens": int(round(replaced)), "disc_original_tokens": int(round(scored - replaced))}


def auc_from_histograms(pos: list[float], neg: list[float]) -> float | None:
    """P(score of a replaced token > score of an original one), ties within a bin counting half."""
    n_pos, n_neg = sum(pos), sum(neg)
    if n_pos <= 0 or n_neg <= 0:
        return None
    below, total = 0.0, 0.0
    for p, n in zip(pos, neg):  # bins in increasing logit order
        total += p * (below + 0.5 * n)
        below += n
    return total / (n_pos * n_neg)


def summarize(sums: dict[str, list[float] | float], steps: int) -> dict[str, float]:
    """Window sums -> the metrics of one line (keys without data are left out)."""
    out: dict[str, float] = {}
    idle = {k for k, phase in PHASE_STEPS.items() if phase in sums and sums[phase] <= 0}
    for k in MEAN_KEYS:
        if k in sums and k not in idle:
            out[k] = sums[k] / (sums[PHASE_STEPS[k]] if k in PHASE_STEPS and PHASE_STEPS[k] in sums else max(steps, 1))
    for name, (num, den) in RATIOS.items():
        if num in sums and den in sums and not _idle_ratio(name, idle):
            out[name] = sums[num] / sums[den] if sums[den] > 0 else 0.0
    if "hist_replaced" in sums and "disc_loss" not in idle:
        auc = auc_from_histograms(sums["hist_replaced"], sums["hist_original"])
        if auc is not None:
            out["disc_auc"] = auc
    return out


def _idle_ratio(name: str, idle: set[str]) -> bool:
    """Whether ratio ``name`` belongs to a phase with no steps in the window (mlm_then_rtd)."""
    if name.startswith("disc_mlm"):
        return "disc_mlm_loss" in idle
    return (name.startswith("disc_") or name == "replaced_token_share") and "disc_loss" in idle


def scalars(line: dict) -> dict[str, float]:
    """The TensorBoard scalars of a metrics.jsonl line: its finite numbers but ``step``, by tag."""
    return {TAGS.get(k, f"device/{k}"): float(v) for k, v in line.items()
            if k != "step" and isinstance(v, (int, float)) and math.isfinite(v)}


def wall_times(folder: Path) -> dict[int, float]:
    """step -> wall time of the scalar events in ``folder``'s event files, read one event at a time
    (TensorBoard's own reader, which stops at a record cut short by a kill: the records before it
    still count). Only the step's first wall time is kept, not every event of a long run."""
    out: dict[int, float] = {}
    for path in sorted(folder.glob(EVENT_GLOB)):
        for event in LegacyEventFileLoader(str(path)).Load():
            if event.summary.value:
                out.setdefault(event.step, event.wall_time)
    return out


def write_scalars(writer: SummaryWriter, line: dict, wall_time: float) -> None:
    for tag, value in scalars(line).items():
        writer.add_scalar(tag, value, global_step=line["step"], walltime=wall_time)


def restart_events(folder: Path, lines: Iterable[dict]) -> SummaryWriter:
    """A new event file holding ``lines`` (those kept on resume), at the wall times the old file
    gives them; the old files are removed."""
    lines = iter(lines)
    first = next(lines, None)
    old = wall_times(folder) if first is not None and folder.is_dir() else {}
    for path in folder.glob(EVENT_GLOB):
        path.unlink()
    writer = SummaryWriter(log_dir=str(folder))
    try:
        for line in itertools.chain([first], lines) if first is not None else ():
            write_scalars(writer, line, old.get(line["step"], time.time()))
        writer.flush()
    except BaseException:  # a stop in a long run's rewrite (seconds), a full disk: its thread ends with it, and
        with contextlib.suppress(Exception):  # the file the lines were read from is closed
            writer.close()
        if close := getattr(lines, "close", None):  # (read_lines: a generator holding metrics.jsonl open)
            close()
        raise
    return writer


def keep_lines(path: Path, upto: int, tail: collections.deque) -> int:
    """Rewrite ``path`` with its lines up to step ``upto`` (none for 0: a fresh run), a line at a
    time, so a long run's log is never held whole; the last of them go into ``tail``. Their number."""
    kept, tmp = 0, path.with_name(path.name + ".part")
    with named(tmp), tmp.open("w", encoding="utf-8") as out:  # a full disk: the line names the file
        if upto and path.is_file():
            with path.open(encoding="utf-8") as f:
                for ln in f:
                    if ln.strip() and (row := json.loads(ln))["step"] <= upto:
                        out.write(ln.rstrip("\r\n") + "\n")
                        tail.append(row)
                        kept += 1
    os.replace(tmp, path)
    return kept


def close_events(writer: SummaryWriter, folder: Path) -> None:
    """Close the writer and give its file (the only one in ``folder``) the fixed name."""
    writer.close()
    files = [p for p in folder.glob(EVENT_GLOB) if p.name != EVENT_FILE.name]
    if len(files) == 1:
        files[0].replace(folder / EVENT_FILE.name)


def _quiet_event_writer_thread() -> None:
    """TensorBoard writes events from a thread of its own, which dies of a full disk printing its
    traceback; the next write re-raises that error in the main thread (named there: :func:`named`),
    so that thread's OSError prints nothing. Other threads' exceptions print as before."""
    previous = threading.excepthook
    if getattr(previous, "kolectra_events", False):
        return

    def hook(args):
        if not (type(args.thread).__name__ == "_AsyncWriterThread" and isinstance(args.exc_value, OSError)):
            previous(args)

    hook.kolectra_events = True
    threading.excepthook = hook


@contextlib.contextmanager
def named(path) -> Iterator[None]:
    """An OSError inside (a full disk, a file-size limit) as one naming ``path``: a write() and a
    flush() report it without the file's name."""
    try:
        yield
    except OSError as e:
        if e.filename or not e.errno:
            raise
        raise OSError(e.errno, e.strerror, str(path)) from e


class MetricsLog:
    def __init__(self, path: Path, dev, total_steps: int, resume_step: int = 0, flops_per_step: float = 0.0,
                 peak_flops: float = 0.0, on_line=None):
        """``on_line(line, lines)``: called on rank 0 after each line is written, with the last few lines
        (:data:`model.health.LINES_READ`: what a health verdict reads)."""
        self.dev, self.on_line = dev, on_line
        self.abandoned = False  # set by abandon(): an error ended the run and its files are closed
        self.flops_per_step, self.peak_flops = flops_per_step, peak_flops
        # the last lines of the run so far, all that is kept: a long run's lines are in the file alone
        self.lines: collections.deque[dict] = collections.deque(maxlen=LINES_READ)
        # On resume keep the lines up to the checkpoint's step: later ones are logged again.
        kept = keep_lines(path, resume_step, self.lines) if dev.is_main else 0
        self.file = path.open("a", encoding="utf-8") if dev.is_main else None
        self.event_dir = path.parent / EVENT_DIR
        try:
            self.events = restart_events(self.event_dir, read_lines(path) if kept else ()) if dev.is_main else None
        except BaseException:  # a Ctrl-C in a long run's rewrite, a full disk: the log never reaches the trainer,
            if self.file is not None:  # whose clean-up (abandon) would close it; left open while the error was kept
                self.file.close()
            raise
        if dev.is_main:
            _quiet_event_writer_thread()
        self.bar = Bar("pretrain", total_steps, "step", initial=resume_step) if dev.is_main else None
        self.sums: dict[str, torch.Tensor] = {}
        self.tokens, self.steps, self.last = 0, 0, (self.lines[-1] if self.lines else {})
        # the run's non-padding tokens up to the last written line, all ranks, earlier processes included;
        # counted_from: the step they are counted from (a checkpoint written before the count: its resume step)
        self.nonpad_tokens = int(self.last.get("nonpad_tokens", 0))
        self.counted_from = 0 if "nonpad_tokens" in self.last or not resume_step else resume_step
        self.t_window = time.perf_counter()
        # rank 0's failure to write a line (a full disk), where several ranks agree: kept, not raised in the
        # middle of a step's collectives; the loop raises it where every rank learns of it (StopAtStepEnd.agreed),
        # else close(). One process and an XLA pod's hosts raise it at once.
        self.failed: Exception | None = None

    # -- resume -----------------------------------------------------------------------------
    def state_dict(self) -> dict:
        # copies: the sums are added to in place (a CPU tensor's .cpu() would be the running sum itself)
        # window_seconds: the open window's time so far, so that a resumed run's first line divides the
        # window's tokens by the whole window's time, not by this process's share of it
        return {"sums": {k: v.detach().to("cpu", copy=True) for k, v in self.sums.items()}, "tokens": self.tokens,
                "steps": self.steps, "nonpad_tokens": self.nonpad_tokens, "counted_from": self.counted_from,
                "window_seconds": time.perf_counter() - self.t_window}

    def load_state_dict(self, state: dict) -> None:
        # A checkpoint written with another number of AUC bins (64 before stage version 6): its
        # window's histograms are dropped, so that window's AUC covers the steps after the resume.
        self.sums = {k: v.to(self.dev.torch_device, copy=True) for k, v in state["sums"].items()
                     if not (k.startswith("hist_") and v.shape[-1] != AUC_BINS)}
        self.tokens, self.steps = int(state["tokens"]), int(state["steps"])
        if "nonpad_tokens" in state:  # every rank restores the same total (rank 0 alone reads the kept lines)
            self.nonpad_tokens, self.counted_from = int(state["nonpad_tokens"]), int(state["counted_from"])
        if "window_seconds" in state:  # absent in older checkpoints: their window's rate counts from the resume
            self.t_window = time.perf_counter() - float(state["window_seconds"])

    # -- logging ----------------------------------------------------------------------------
    def add(self, sums: dict[str, torch.Tensor], tokens: int = 0) -> None:
        """Add one micro-step's (or step's) additive metrics; ``tokens`` counted on the host."""
        for k, v in sums.items():
            if k not in self.sums:  # device zeros: a window's first step traces like the others (XLA)
                self.sums[k] = self.dev.zeros_like(v)
        # one in-place foreach add for all of them (one launch on CUDA instead of one per metric; on
        # the CPU 28 against 50 us for ELECTRA's 20 metrics), the same sums in the same order
        torch._foreach_add_([self.sums[k] for k in sums], [v.detach() for v in sums.values()])
        self.tokens += tokens

    def step_done(self, step: int, lr: float, write: bool) -> None:
        self.steps += 1
        if self.bar is not None:
            self.bar.advance()
        if write:
            self.end_window(step, lr)

    def end_window(self, step: int, lr: float) -> None:
        """Write the open window as the line of ``step`` (``lr``: its last update's rate)."""
        # Device counters are read now (host bookkeeping): they describe the steps up to this one.
        window = {"step": step, "lr": lr, "steps": self.steps, "t_window": self.t_window,
                  "extra": self.dev.extra_metrics()}
        tensors = {**self.sums, "tokens": torch.tensor(float(self.tokens))}
        # The values arrive once the device has them (at once here; on XLA after the step runs).
        self.dev.read_back(tensors, lambda values: self._write(window, values))
        self.sums, self.tokens, self.steps, self.t_window = {}, 0, 0, time.perf_counter()

    def _write(self, window: dict, sums: dict) -> None:
        # No synchronize here: on XLA this runs in a step closure and would stall the next step.
        if self.abandoned:  # a line the device delivers after the run ended in error (its files closed)
            return
        now = time.perf_counter()
        step, steps = window["step"], window["steps"]
        seconds = max(now - window["t_window"], 1e-9)
        tokens = sums.pop("tokens") * self.dev.world_size  # the mean over ranks, times the ranks: all of them
        self.nonpad_tokens += int(round(tokens))
        line = {"step": step, **summarize(sums, steps), **class_counts(sums, self.dev.world_size),
                "lr": window["lr"], "tokens_per_s": tokens / seconds,
                "nonpad_tokens": self.nonpad_tokens}
        if self.flops_per_step and self.peak_flops:
            line["mfu"] = self.flops_per_step * steps / seconds / (self.peak_flops * self.dev.chips)
        line = {**line, **window["extra"]}
        self.last = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in line.items()}
        if self.file is not None and self.failed is None:
            try:
                self._write_line(step)
            except Exception as e:  # noqa: BLE001 - raised where the ranks agree (model.rank_failures)
                if self.dev.world_size == 1 or not self.dev.ranks_can_agree:
                    raise  # nothing to agree on (one process, an XLA pod's hosts): raised at once, as before
                self.failed = e

    def _write_line(self, step: int) -> None:
        """Rank 0's part of a line: the files, the bar, the health watch."""
        with named(self.file.name):  # a full disk: the line names the file, as every stage's writes do
            self.file.write(json.dumps(self.last) + "\n")
            self.file.flush()
        with named(self.event_dir):  # (the event file's name is TensorBoard's until it is closed)
            write_scalars(self.events, self.last, time.time())
            self.events.flush()
        self.bar.report(progress_text(self.last), at=step)
        self.lines.append(self.last)
        if self.on_line is not None:
            self.on_line(self.last, list(self.lines))

    def close(self) -> None:
        """Close the files; a line that failed (:attr:`failed`) and was not raised yet is raised here."""
        self.dev.flush()  # lines still waiting for their values
        if self.file is not None:
            self.file.close()
            close_events(self.events, self.event_dir)
            self.bar.close()
        if self.failed is not None:
            raise self.failed

    def abandon(self) -> None:
        """Close the files of a run that an error ends (a crash, a divergence, a stop), raising nothing: the
        lines so far are in them (each is flushed as written), the event file keeps TensorBoard's own name
        (a finished run's has the fixed one), and a line the device delivers later is not written (the trainer
        flushes the device first: XLA's closures hold the last window's line). Left to the garbage
        collector, ``metrics.jsonl`` and the event writer's thread stayed open as long as the error's traceback
        was kept (by a caller that catches it, in-process; a test's ResourceWarning)."""
        self.abandoned = True
        if self.file is not None and not self.file.closed:
            with contextlib.suppress(Exception):  # the run's own error is the one raised, not this
                self.file.close()
            with contextlib.suppress(Exception):
                self.events.close()
