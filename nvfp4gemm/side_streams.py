"""Side streams forked from a caller's stream and joined back into it: the one fork/join of
the launches that run side by side (exp. 148: MaskedGroupedGemm's skinny + mixed split; exp.
152: chunks of more than 16 groups, in the dispatcher and in MaskedGroupedGemm).

The fork event is recorded on the caller's stream after what is queued there; each side stream
waits on it before its work, and the caller's stream waits on every side stream's join event
after its own work, so the caller sees one ordered unit (a CUDA graph capture of it captures
the fork and the joins).  The streams and events are made at first use and reused: one object
serves one caller at a time (calls of one object on two streams at once race, as its kernels'
workspaces do)."""

from __future__ import annotations

import torch


class SideStreams:
    def __init__(self, device):
        self.device = device
        self._fork = None
        self._sides = []  # (side stream, its join event), grown on demand

    def run(self, cur, side_work, main_work) -> None:
        """Enqueue `side_work[i](stream)` on side stream i (each forked from torch stream `cur`
        after what is queued there), then `main_work()` (which enqueues on `cur`), then make
        `cur` wait for every side stream used -- also when a work item raises: the side streams
        started by then are joined before the error propagates, so a caller that frees the
        outputs after catching it does not race the kernels already queued there."""
        if self._fork is None:
            self._fork = torch.cuda.Event()
        while len(self._sides) < len(side_work):
            self._sides.append((torch.cuda.Stream(self.device), torch.cuda.Event()))
        used = self._sides[:len(side_work)]
        self._fork.record(cur)
        started = 0
        try:
            for (side, _join), work in zip(used, side_work):
                side.wait_event(self._fork)
                started += 1
                work(side)
            main_work()
        finally:
            for side, join in used[:started]:
                join.record(side)
                cur.wait_event(join)
