"""horovod.common and horovod.common.util, for scripts that import from them:
the exceptions, process sets and the few helpers Horovod's own examples use."""

from horovodd.exceptions import HorovodInternalError, HostsUpdatedInterrupt  # noqa: F401
from horovodd.process_sets import ProcessSet, global_process_set  # noqa: F401


def is_iterable(x):
    try:
        iter(x)
    except TypeError:
        return False
    return True


def split_list(items, parts):
    """`items` in `parts` consecutive pieces of nearly equal length (the
    first ones one longer), as Horovod's helper splits parameters into groups."""
    items = list(items)
    size, extra = divmod(len(items), parts)
    pieces, start = [], 0
    for index in range(parts):
        end = start + size + (1 if index < extra else 0)
        pieces.append(items[start:end])
        start = end
    return pieces


def num_rank_is_power_2(num_rank):
    return num_rank != 0 and (num_rank & (num_rank - 1)) == 0
