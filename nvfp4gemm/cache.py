"""Bounded caches of device workspaces and launch tables that the dispatcher's replays can trust.

`dispatch.custom_kernel` keeps the prepared launches of its RECENT_PREPARED most recent inputs
and replays them from packed raw pointers, without asking the kernel module again.  So every
tensor such a launch points into (A16 buffers, stream-K partials and flags, schedule tables)
must stay alive while the launch is kept.  Each prepare looks up at most one entry per cache
and `lru_lookup` evicts least recently looked-up entries first, so with at least
RECENT_PREPARED entries an entry outlives the seven prepares after its own, which is as long as
the dispatcher keeps that launch.  (Session 36 found the sm_90a caches clearing themselves
whole when full: the 17th new dual output freed the A16 buffers that the 16th's kept launch
still pointed into, and a replay of it would have written there.)
"""

from __future__ import annotations

from collections import OrderedDict

RECENT_PREPARED = 8  # the dispatcher's kept launches (dispatch._RECENT_MAX)


def lru_lookup(cache: OrderedDict, key, build, max_entries: int) -> tuple[object, bool]:
    """(value, built): the cached value of `key`, else `build()` cached; least recently looked-up
    entries are dropped beyond `max_entries` (>= RECENT_PREPARED, see the module doc)."""
    if max_entries < RECENT_PREPARED:
        raise ValueError(f"a cache of {max_entries} entries could drop a kept launch's buffers "
                         f"(the dispatcher keeps {RECENT_PREPARED})")
    hit = cache.get(key)
    if hit is not None:
        cache.move_to_end(key)
        return hit, False
    hit = cache[key] = build()
    while len(cache) > max_entries:
        cache.popitem(last=False)
    return hit, True
