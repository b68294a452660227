"""Bounded caches of device workspaces and launch tables.

`dispatch.custom_kernel` launches every input of one signature through a launch template that
holds the workspaces and tables its packed arguments point into (`keep`), so evicting an entry
here never frees a live template's buffers.  A template that a caller's CUDA-graph capture
launched through is kept for the life of the process (`dispatch._PINNED`, exp. 131: before, a
caller's graph outlived its template only as long as these caches kept the entry, and a replay
after both had dropped it wrote into freed memory).  `lru_lookup` evicts least recently
looked-up entries first and refuses caches of fewer than MIN_ENTRIES entries.
(Session 36 found the sm_90a caches clearing themselves whole when full: the 17th new dual
output freed the A16 buffers that a launch kept by the dispatcher of that time still pointed
into, and a replay of it would have written there.)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from contextlib import contextmanager

MIN_ENTRIES = 8  # the floor of every cache's size (module doc)

_PRIVATE = threading.local()  # .depth > 0: lookups build private values (`private_buffers`)


@contextmanager
def private_buffers():
    """Inside: every `lru_lookup` builds a new value (which then replaces the cached one).  An
    eager launch template's workspaces must be its own: two templates of one signature on two
    streams, built from inputs with the same output address (the same input, or a freed output's
    address reused by the allocator), were handed the same cached A16 buffer, split-K partials
    and counters, and would race when their streams overlap (exp. 135).  The cache still holds
    the latest value, which a template made inside a caller's CUDA-graph capture reuses (it may
    not upload tables there)."""
    _PRIVATE.depth = getattr(_PRIVATE, "depth", 0) + 1
    try:
        yield
    finally:
        _PRIVATE.depth -= 1


def lru_lookup(cache: OrderedDict, key, build, max_entries: int) -> tuple[object, bool]:
    """(value, built): the cached value of `key`, else `build()` cached; least recently looked-up
    entries are dropped beyond `max_entries` (>= MIN_ENTRIES, see the module doc); inside
    `private_buffers`, always a new `build()`."""
    if max_entries < MIN_ENTRIES:
        raise ValueError(f"a cache of {max_entries} entries could drop buffers a captured launch "
                         f"points into (at least {MIN_ENTRIES}: nvfp4gemm/cache.py)")
    hit = None if getattr(_PRIVATE, "depth", 0) else cache.get(key)
    if hit is not None:
        cache.move_to_end(key)
        return hit, False
    hit = cache[key] = build()
    cache.move_to_end(key)
    while len(cache) > max_entries:
        cache.popitem(last=False)
    return hit, True


def lru_lookup_on_stream(cache: OrderedDict, key, build, max_entries: int) -> tuple[object, bool]:
    """`lru_lookup` of device tables that `build` uploads on torch's current stream (a tensor or a
    tuple holding tensors): a value built on one stream and found from another orders the finding
    stream after the upload (`stream_wait` on the event `stream_mark` recorded right after the
    build).  Session 54's review: two streams meeting the same addresses (NVFP4_TABLE_WRITER=0's
    per-address-set tables, a template made in a capture) could read tables another stream was
    still uploading."""
    def build_marked():
        value = build()
        ts = _tensors(value)
        return value, (stream_mark(ts[0].device) if ts else None)

    (value, mark), built = lru_lookup(cache, key, build_marked, max_entries)
    if not built:
        stream_wait(mark, value)
    return value, built


def _tensors(value) -> list:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def _stream(device, handle):
    import torch

    if handle is None:
        return torch.cuda.current_stream(device)
    return torch.cuda.ExternalStream(int(handle), device=device)


def stream_mark(device, handle=None):
    """(stream handle, CUDA event recorded there now, device), marking the end of what was just enqueued
    on stream `handle` (a raw handle or a CUstream; torch's current stream if None): a table
    upload, a setup kernel.  None on a CPU device or inside a capture (a captured node is no eager
    stream's work)."""
    import torch

    if getattr(device, "type", None) != "cuda" or in_capture():
        return None
    stream = _stream(device, handle)
    event = torch.cuda.Event()
    event.record(stream)
    return stream.cuda_stream, event, device


def stream_wait(mark, value, handle=None) -> None:
    """Order stream `handle` (torch's current stream if None) after `mark` (`stream_mark`) when
    the mark is another stream's, and tell the caching allocator that the tensors of `value` (a
    tensor or a tuple holding tensors) are used on this stream too (their memory is then not
    reused before this stream's work on them is done).  Nothing inside a capture: what it reads
    was made by eager calls before the capture began.  (A same-stream hit costs the handle
    comparison only: the tensors are walked just before a wait.)"""
    if mark is None or (handle is not None and int(handle) == mark[0]) or in_capture():
        return
    stream = _stream(mark[2], handle)
    if stream.cuda_stream == mark[0]:
        return
    stream.wait_event(mark[1])
    for t in _tensors(value):
        t.record_stream(stream)


def in_capture() -> bool:
    """Whether torch's current CUDA stream is capturing a CUDA graph."""
    import torch

    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def refuse_in_capture() -> None:
    """RuntimeError inside CUDA-graph capture, before a table upload: captured there, the copy
    would replay from a pinned host block that is reused afterwards."""
    if in_capture():
        raise RuntimeError("a grouped launch is being prepared inside CUDA-graph capture: call custom_kernel "
                           "once with these inputs before capturing")
