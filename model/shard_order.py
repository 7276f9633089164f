"""Which rows of the examples a rank reads, and in what order: the pretraining loader's training
order (:class:`kolectra.model.data.ExampleLoader`), a pure function of (seed, world size, rank,
epoch, position), so a resumed loader rebuilds any position without replaying history.

The deal (:func:`deal`): one seeded permutation of the shards for the run, laid end to end and
cut into ``world_size`` runs of equal rows (rank r takes rows [r N/W, (r+1) N/W) of that stream).
A rank owns whole shards plus at most the two at its ends, shared by rows with its neighbours;
with fewer shards than ranks a shard is shared by several ranks, each reading a row range of it.
A host therefore fetches and opens about 1/W of the artifact (:func:`rank_files`), and every rank
has the same number of batches an epoch (the shares differ by one row at most).

Each epoch (:class:`RankOrder`): the rank's rows in blocks of :data:`BLOCK_ROWS`, the blocks in a
seeded order (seed, epoch, rank), taken :data:`WINDOW_BLOCKS` at a time, and the rows of each
window in a seeded permutation (seed, epoch, rank, window). Memory: one window's positions (8 bytes
a row of the window), not a permutation of the whole artifact in every rank.

Why the deal stays fixed for the run instead of being dealt anew each epoch: a fresh deal would
make every host fetch shards it has not got, 1 - (1 - 1/W)^e of the artifact after e epochs
(74 % on 8 hosts after 10 epochs), which is what breaks when the artifact outgrows a disk. The
gradient of a step is averaged over the ranks, so each global batch mixes rows of every rank's
share whichever way the shards were dealt; each epoch still draws new blocks, windows and rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

BLOCK_ROWS = 4096  # rows of a shard that stay together when an epoch's order is drawn
WINDOW_BLOCKS = 256  # blocks whose rows are shuffled together: about a million rows, 8 MB of positions
_DEAL = 0x5EA1  # a second word of the deal's seed, apart from any (seed, epoch, ...) of the epochs

Segment = tuple[int, int, int]  # (shard, first row, row after the last)


def deal(counts: Sequence[int], seed: int, world_size: int) -> list[list[Segment]]:
    """Every rank's rows: the shards (their row ``counts``) in a seeded order, cut into
    ``world_size`` runs of equal rows."""
    order = np.random.default_rng([seed, _DEAL]).permutation(len(counts))
    total = int(sum(counts))
    bounds = [total * r // world_size for r in range(world_size + 1)]
    out: list[list[Segment]] = [[] for _ in range(world_size)]
    at = 0  # where the next shard starts in the stream
    for s in order:
        n = int(counts[s])
        for r in range(world_size):
            lo, hi = max(at, bounds[r]), min(at + n, bounds[r + 1])
            if lo < hi:
                out[r].append((int(s), lo - at, hi - at))
        at += n
    return out


def shard_files(shard: dict) -> list[str]:
    """The files of one entry of index.json's ``shards`` (format 2: one Arrow file; 1: .npy files)."""
    return [shard["path"]] if "path" in shard else [shard[k] for k in ("input_ids", "token_type_ids") if k in shard]


def rank_files(shards: Sequence[dict], seed: int, rank: int, world_size: int) -> frozenset[str]:
    """The artifact's files rank ``rank`` reads: index.json and the shards of its share."""
    mine = deal([int(s["examples"]) for s in shards], seed, world_size)[rank]
    return frozenset(["index.json", *(f for s, _, _ in mine for f in shard_files(shards[s]))])


def deal_note(shards: Sequence[dict], seed: int, world_size: int) -> str:
    """One line on how the shards are dealt, for the run's start."""
    parts = deal([int(s["examples"]) for s in shards], seed, world_size)
    files = [len({s for s, _, _ in p}) for p in parts]
    rows = [sum(b - a for _, a, b in p) for p in parts]  # every rank's, not rank 0's alone: shares differ by a row
    line = (f"the examples' {len(shards)} shard(s) are dealt to {world_size} ranks: each reads "
            f"{_span(files)} of them and {_span(rows)} of {sum(rows):,} rows")
    if len(shards) < world_size:
        line += (f"; fewer shards than ranks, so ranks share shards by row ranges and each host fetches whole "
                 f"shards: rebuild the examples with a smaller shard_size (kolectra examples --set shard_size=N) "
                 f"for at least {world_size} shards")
    return line


def _span(counts: Sequence[int]) -> str:
    """``4`` when every rank's count is 4, else ``3 to 4``."""
    lo, hi = min(counts), max(counts)
    return f"{lo:,}" if lo == hi else f"{lo:,} to {hi:,}"


class RankOrder:
    """One rank's rows in each epoch's order, as global example numbers (row of shard s = starts[s] + row)."""

    def __init__(self, segments: Sequence[Segment], starts: np.ndarray, seed: int, rank: int):
        self.seed, self.rank, self.starts = seed, rank, np.asarray(starts, dtype=np.int64)
        blocks = [(s, a, min(b, a + BLOCK_ROWS)) for s, lo, b in segments for a in range(lo, b, BLOCK_ROWS)]
        self.blocks = np.array(blocks, dtype=np.int64).reshape(-1, 3)
        self.rows = int((self.blocks[:, 2] - self.blocks[:, 1]).sum())
        self._epoch, self._epoch_blocks, self._window_starts = -1, self.blocks, np.zeros(1, np.int64)
        self._window: tuple[tuple[int, int], np.ndarray] | None = None

    def positions(self, epoch: int, start: int, stop: int) -> np.ndarray:
        """The global example numbers at positions [start, stop) of ``epoch``'s order."""
        self._draw_epoch(epoch)
        out, w = [], int(np.searchsorted(self._window_starts, start, side="right")) - 1
        while start < stop:
            lo = self._window_starts[w]
            hi = min(stop, int(self._window_starts[w + 1]))
            out.append(self._window_rows(epoch, w)[start - lo:hi - lo])
            start, w = hi, w + 1
        return np.concatenate(out) if out else np.zeros(0, np.int64)

    def _draw_epoch(self, epoch: int) -> None:
        if epoch == self._epoch:
            return
        blocks = self.blocks[np.random.default_rng([self.seed, epoch, self.rank]).permutation(len(self.blocks))]
        sizes = np.add.reduceat(blocks[:, 2] - blocks[:, 1], np.arange(0, len(blocks), WINDOW_BLOCKS)) \
            if len(blocks) else np.zeros(0, np.int64)
        self._epoch, self._epoch_blocks = epoch, blocks
        self._window_starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    def _window_rows(self, epoch: int, w: int) -> np.ndarray:
        if self._window is None or self._window[0] != (epoch, w):
            blocks = self._epoch_blocks[w * WINDOW_BLOCKS:(w + 1) * WINDOW_BLOCKS]
            rows = np.concatenate([np.arange(self.starts[s] + a, self.starts[s] + b) for s, a, b in blocks])
            rng = np.random.default_rng([self.seed, epoch, self.rank, w])
            self._window = ((epoch, w), rows[rng.permutation(len(rows))])
        return self._window[1]
