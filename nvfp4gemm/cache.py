"""Bounded caches of device workspaces and launch tables.

`dispatch.custom_kernel` launches every input of one signature through a launch template that
holds the workspaces and tables its packed arguments point into (`keep`), so evicting an entry
here never frees a live template's buffers.  A launch captured in a CUDA graph points into them
too, and outlives its template only as long as these caches keep the entry: `lru_lookup` evicts
least recently looked-up entries first and refuses caches of fewer than RECENT_PREPARED entries.
(Session 36 found the sm_90a caches clearing themselves whole when full: the 17th new dual
output freed the A16 buffers that a launch kept by the dispatcher of that time still pointed
into, and a replay of it would have written there.)
"""

from __future__ import annotations

from collections import OrderedDict

RECENT_PREPARED = 8  # the floor of every cache's size (module doc)


def lru_lookup(cache: OrderedDict, key, build, max_entries: int) -> tuple[object, bool]:
    """(value, built): the cached value of `key`, else `build()` cached; least recently looked-up
    entries are dropped beyond `max_entries` (>= RECENT_PREPARED, see the module doc)."""
    if max_entries < RECENT_PREPARED:
        raise ValueError(f"a cache of {max_entries} entries could drop a kept launch's buffers "
                         f"(at least {RECENT_PREPARED}: nvfp4gemm/cache.py)")
    hit = cache.get(key)
    if hit is not None:
        cache.move_to_end(key)
        return hit, False
    hit = cache[key] = build()
    while len(cache) > max_entries:
        cache.popitem(last=False)
    return hit, True
