"""Benchmark: packed rows' attention mask forms on the CPU (model/attention.py), encoder forward + backward.

    python benchmarks/attention_masks.py [--quick] [--presets mini,small] [--batch-size N] [--threads N]

The discriminator's encoder of each preset (its own dropout settings), in training mode, on one
batch of packed rows of length 128 (sequences of 8 to 64 tokens, the last row's tail padding), one
forward and backward a call, three ways alternated round by round:

- ``bias, CPU attention``: the dense float bias through the CPU's own attention function
  (model/cpu_dropout.py), what the CPU trainer runs (the baseline);
- ``bias, SDPA``: the same bias through transformers' SDPA function;
- ``bool, SDPA``: the boolean mask through SDPA (what CUDA uses where FlexAttention cannot run).

FlexAttention has no backward on the CPU (torch 2.14), so it is not timed here. Each form's CPU
seconds per call are the median over the rounds (the process's CPU time, not wall time: the
machines are shared). Beside them, the bytes of each form's mask for the batch: B x L x L x 4 for
the bias, x 1 for the booleans, and a ``BlockMask``'s block tables.

``value`` is ``bool, SDPA``'s CPU seconds per call on the last preset, ``baseline`` the CPU path's;
lower is better here, so ``ratio`` < 1 means the booleans are faster.

``--quick``: ``mini`` at batch 8, 3 rounds (under a minute on 2 cores). Full: ``mini`` and
``small`` at batch 16, 5 rounds (a few minutes).
"""

from __future__ import annotations

import statistics

from common import cpu_seconds, emit, parser

L = 128


def packed_docs(batch: int, seed: int = 0):
    """Doc ids of packed rows: sequences of 8..64 tokens filling each row; the last row ends in padding."""
    import torch

    g = torch.Generator().manual_seed(seed)
    docs = torch.zeros(batch, L, dtype=torch.long)
    for r in range(batch):
        end = L if r < batch - 1 else L // 2
        at, d = 0, 1
        while at < end:
            n = min(int(torch.randint(8, 65, (1,), generator=g)), end - at)
            docs[r, at:at + n] = d
            at, d = at + n, d + 1
    return docs


def mask_bytes(mask) -> int:
    import torch

    if isinstance(mask, torch.Tensor):
        return mask.numel() * mask.element_size()
    return sum(t.numel() * t.element_size() for t in mask.as_tuple() if isinstance(t, torch.Tensor))


def main() -> None:
    p = parser(__doc__, "a few minutes on 2 cores")
    p.add_argument("--presets", default=None, help="comma-separated presets (default: mini, and small without --quick)")
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1: CPU seconds without spinning)")
    args = p.parse_args()

    import torch
    from transformers import ElectraModel

    from kolectra.model import attention, cpu_dropout
    from kolectra.model.electra import hf_configs
    from kolectra.model.presets import preset as model_preset

    torch.set_num_threads(args.threads)
    presets = args.presets.split(",") if args.presets else (["mini"] if args.quick else ["mini", "small"])
    batch = args.batch_size or (8 if args.quick else 16)
    rounds = 3 if args.quick else 5
    docs = packed_docs(batch)
    positions = attention.document_positions(docs)
    masks = {form: attention.document_attention(docs, form)[0] for form in attention.FORMS}
    sizes = {form: mask_bytes(m) for form, m in masks.items()}
    print(f"mask bytes for [{batch}, {L}]: " + ", ".join(f"{f} {n:,}" for f, n in sizes.items()))

    results = {}
    for preset in presets:
        cfg = model_preset(preset).model
        torch.manual_seed(0)
        ids = torch.randint(5, 8000, (batch, L)) * (docs > 0)
        nets = {}
        for name, impl, form in (("bias, CPU attention", cpu_dropout.ATTENTION, "bias"),
                                 ("bias, SDPA", "sdpa", "bias"), ("bool, SDPA", attention.PACKED, "bool")):
            torch.manual_seed(0)
            net = ElectraModel(hf_configs(cfg, 8000, 0)[0]).train()
            if impl == cpu_dropout.ATTENTION:
                cpu_dropout.install(net)
            else:
                net.set_attn_implementation(impl)
            nets[name] = (net, masks[form])

        def call(net, mask):
            h = net(input_ids=ids, attention_mask=mask, position_ids=positions).last_hidden_state
            h.float().pow(2).mean().backward()

        for net, mask in nets.values():  # warm-up
            call(net, mask)
        taken = {name: [] for name in nets}
        for _ in range(rounds):
            for name, (net, mask) in nets.items():
                c0 = cpu_seconds()
                call(net, mask)
                taken[name].append(cpu_seconds() - c0)
        results[preset] = {name: round(statistics.median(v), 3) for name, v in taken.items()}
        print(f"{preset}: CPU s per forward+backward (median of {rounds}): "
              + ", ".join(f"{n} {s}" for n, s in results[preset].items()))

    last = results[presets[-1]]
    emit("attention_masks", "cpu_s_per_forward_backward", last["bool, SDPA"], "bias, CPU attention",
         last["bias, CPU attention"],
         {"presets": presets, "batch_size": batch, "seq_len": L, "rounds": rounds, "threads": args.threads},
         per_preset=results, mask_bytes=sizes)


if __name__ == "__main__":
    main()
