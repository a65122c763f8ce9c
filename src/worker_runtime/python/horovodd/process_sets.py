"""Process sets: subsets of the job's ranks that run collectives among
themselves (Horovod's ProcessSet API).

    evens = hvd.ProcessSet([0, 2])
    hvd.init(process_sets=[evens])            # static: known at init
    hvd.allreduce(x, process_set=evens)       # only ranks 0 and 2 call it

    # with HOROVOD_DYNAMIC_PROCESS_SETS=1 (or init(process_sets="dynamic")):
    odds = hvd.add_process_set([1, 3])        # every rank calls it
    hvd.remove_process_set(odds)

Ranks are global ranks. global_process_set (id 0) is every rank. The sets
belong to a generation of the job: after an elastic reset only the global
set exists, as in Horovod, and the others must be added again.

The runtime keeps the sets (_horovodd.add_process_set and friends); this
module keeps the Python objects that name them.
"""

import os

from horovodd import _horovodd


class ProcessSet:
    """A set of global ranks. Pass it to init(process_sets=[...]) or to
    add_process_set(); until then (and after it is removed) its
    process_set_id is None."""

    process_set_id = None
    ranks = None

    def __init__(self, ranks):
        try:
            ranks = sorted(ranks)
        except TypeError:
            raise ValueError("ProcessSet takes a list of ranks, got "
                             f"{type(ranks).__name__}") from None
        if any(isinstance(r, bool) or not isinstance(r, int) for r in ranks):
            raise ValueError(f"ProcessSet takes a list of integer ranks, got {ranks}")
        if len(set(ranks)) != len(ranks):
            raise ValueError(f"ProcessSet names a rank twice: {ranks}")
        self.ranks = ranks

    def _require_id(self):
        if self.process_set_id is None:
            raise ValueError(f"{self} is not registered: pass it to hvd.init(process_sets=...) "
                             "or hvd.add_process_set() first")
        return self.process_set_id

    def _current_ranks(self):
        if self._require_id() == 0:
            return list(range(_horovodd.size()))
        return self.ranks

    def size(self):
        """Ranks in the set."""
        return len(self._current_ranks())

    def rank(self):
        """This process's rank within the set (-1 when it is not in it)."""
        ranks = self._current_ranks()
        own = _horovodd.rank()
        return ranks.index(own) if own in ranks else -1

    def included(self):
        """Whether this process is in the set."""
        return _horovodd.rank() in self._current_ranks()

    def invalidate(self):
        self.process_set_id = None
        self.ranks = None

    def __str__(self):
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks})"

    __repr__ = __str__


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0

# Registered sets by id (0: the global set), for this generation.
_registered = {0: global_process_set}
_dynamic = False


def process_set_kwargs(process_set):
    """The keyword arguments a binding takes for `process_set`: none for the
    global set, so calls work with runtimes that know no other."""
    if process_set is None or process_set is global_process_set:
        return {}
    if not isinstance(process_set, ProcessSet):
        raise ValueError("process_set must be a hvd.ProcessSet, got "
                         f"{type(process_set).__name__}")
    process_set_id = process_set._require_id()
    return {} if process_set_id == 0 else {"process_set_id": process_set_id}


def dynamic_enabled():
    return _dynamic or os.environ.get("HOROVOD_DYNAMIC_PROCESS_SETS", "").strip().lower() in (
        "1", "true", "yes", "on")


def _register(process_set, at_init):
    # at_init: the runtime skips its own HOROVOD_DYNAMIC_PROCESS_SETS check, for
    # init(process_sets=[...]) and for init(process_sets="dynamic"), which this
    # module checked already.
    process_set_id = _horovodd.add_process_set(list(process_set.ranks), at_init=at_init)
    process_set.process_set_id = int(process_set_id)
    _registered[process_set.process_set_id] = process_set
    return process_set


def setup_at_init(process_sets):
    """hvd.init's part: registers the static sets (every rank passes the same
    list, in the same order) or turns on dynamic sets for "dynamic"."""
    global _dynamic
    if process_sets is None:
        return
    if isinstance(process_sets, str):
        if process_sets != "dynamic":
            raise ValueError(f"init(process_sets=...) takes a list of ProcessSet or "
                             f"\"dynamic\", got {process_sets!r}")
        _dynamic = True
        return
    for process_set in process_sets:
        if not isinstance(process_set, ProcessSet):
            process_set = ProcessSet(process_set)
        if process_set.process_set_id is not None:
            continue  # already registered (init called again)
        _register(process_set, at_init=True)


def forget_all():
    """After an elastic reset or shutdown: only the global set remains, and
    the objects naming the others are invalidated."""
    for process_set_id, process_set in list(_registered.items()):
        if process_set_id != 0:
            process_set.invalidate()
            del _registered[process_set_id]


def add_process_set(process_set):
    """Registers a new process set (a ProcessSet or a list of ranks) and
    returns its ProcessSet. Needs HOROVOD_DYNAMIC_PROCESS_SETS=1; every rank
    calls it, in the same order."""
    if not dynamic_enabled():
        raise ValueError("adding process sets after init needs dynamic process sets: set "
                         "HOROVOD_DYNAMIC_PROCESS_SETS=1 (or call "
                         "hvd.init(process_sets=\"dynamic\"))")
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.process_set_id is not None:
        raise ValueError(f"{process_set} is already registered")
    return _register(process_set, at_init=_dynamic)


def remove_process_set(process_set):
    """Removes a process set added before; returns whether it was removed
    (the global set never is). Every rank calls it. Needs
    HOROVOD_DYNAMIC_PROCESS_SETS=1."""
    if not dynamic_enabled():
        raise ValueError("removing process sets needs dynamic process sets: set "
                         "HOROVOD_DYNAMIC_PROCESS_SETS=1 (or call "
                         "hvd.init(process_sets=\"dynamic\"))")
    if not isinstance(process_set, ProcessSet) or process_set.process_set_id is None:
        raise ValueError(f"remove_process_set takes a registered ProcessSet, got {process_set}")
    process_set_id = process_set.process_set_id
    if process_set_id == 0:
        return False
    _horovodd.remove_process_set(process_set_id)
    removed = _registered.pop(process_set_id, process_set)
    removed.invalidate()
    process_set.invalidate()
    return True
