"""Training metrics for the pretrain loop: ``metrics.jsonl`` lines and progress messages.

Step metrics stay on the device as running sums; they are read back (``float``) only when a
line is written every ``log_every`` steps, so the steps in between never wait for the device.
A line holds the window means (averaged over ranks), the learning rate and tokens per second
(non-padding tokens, all ranks). Only rank 0 writes.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from pipeline.stage import progress

METRIC_KEYS = ("loss", "gen_loss", "disc_loss", "gen_acc", "disc_acc", "replaced_share")


def eta_text(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


class MetricsLog:
    def __init__(self, path: Path, dev, total_steps: int, resume_step: int = 0):
        self.dev, self.total, self.first = dev, total_steps, resume_step
        kept = []
        if dev.is_main:
            # On resume keep the lines up to the checkpoint's step: later ones are logged again.
            if resume_step and path.is_file():
                kept = [ln for ln in path.read_text(encoding="utf-8").splitlines()
                        if json.loads(ln)["step"] <= resume_step]
            path.write_text("".join(ln + "\n" for ln in kept), encoding="utf-8")
        self.file = path.open("a", encoding="utf-8") if dev.is_main else None
        self.sums: dict[str, torch.Tensor] = {}
        self.tokens, self.steps, self.last = 0, 0, (json.loads(kept[-1]) if kept else {})
        self.t_start = self.t_window = time.perf_counter()

    # -- resume -----------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"sums": {k: float(v) for k, v in self.sums.items()}, "tokens": self.tokens, "steps": self.steps}

    def load_state_dict(self, state: dict) -> None:
        self.sums = {k: torch.tensor(v, dtype=torch.float32, device=self.dev.torch_device)
                     for k, v in state["sums"].items()}
        self.tokens, self.steps = state["tokens"], state["steps"]

    # -- logging ----------------------------------------------------------------------------
    def add(self, metrics: dict[str, torch.Tensor], weight: float, tokens: int) -> None:
        for k in METRIC_KEYS:
            self.sums[k] = self.sums.get(k, 0.0) + metrics[k] * weight
        self.tokens += tokens

    def step_done(self, step: int, lr: float, write: bool) -> None:
        self.steps += 1
        if not write:
            return
        values = self.dev.mean_over_ranks({**self.sums, "tokens": torch.tensor(float(self.tokens))})
        self.dev.synchronize()
        now = time.perf_counter()
        tokens = float(values.pop("tokens")) * self.dev.world_size
        self.last = {"step": step, **{k: float(values[k]) / self.steps for k in METRIC_KEYS}, "lr": lr,
                     "tokens_per_s": tokens / max(now - self.t_window, 1e-9), **self.dev.extra_metrics()}
        if self.file is not None:
            self.file.write(json.dumps(self.last) + "\n")
            self.file.flush()
            eta = (now - self.t_start) / (step - self.first) * (self.total - step)
            progress(f"pretrain step {step}/{self.total} loss {self.last['loss']:.4f} "
                     f"(gen {self.last['gen_loss']:.3f}, disc {self.last['disc_loss']:.4f}) lr {lr:.2e} "
                     f"{self.last['tokens_per_s']:,.0f} tok/s ETA {eta_text(eta)}")
        self.sums, self.tokens, self.steps, self.t_window = {}, 0, 0, time.perf_counter()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
