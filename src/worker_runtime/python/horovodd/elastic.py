"""Elastic training: state that survives membership changes, and the run
loop that rebuilds the job around it (Horovod's semantics).

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            ...
            state.commit()

    train(hvd.elastic.ObjectState(epoch=0))

run() calls the function. When a collective fails (HorovodInternalError: a
peer was lost) it restores the state to the last commit; when commit() or
check_host_updates() raises HostsUpdatedInterrupt it keeps the state. Either
way it then re-rendezvouses for the next generation, rebuilds the rings,
syncs the state on every rank from one rank all of them agree on (the lowest
rank among those with the most commits), calls the reset callbacks and calls
the function again. A worker the job no longer needs exits with status 0.
"""

import copy
import functools

import numpy as np

from horovodd import _horovodd
from horovodd.basics import flush_std_streams
from horovodd.exceptions import HorovodInternalError, HostsUpdatedInterrupt
from horovodd import process_sets
from horovodd.ops import allgather, broadcast_object

__all__ = ["State", "ObjectState", "run", "HorovodInternalError", "HostsUpdatedInterrupt"]


class State:
    """What training needs to resume after a membership change. Subclasses
    implement save() (copy the live values aside), restore() (copy them back)
    and sync(root_rank) (make every rank's live values root_rank's; every
    rank calls it with the same root)."""

    def __init__(self):
        self._reset_callbacks = []
        # Commits behind the current values; after a reset, the sync root's.
        self._commits = 0
        self._resets = 0

    # `commits` and `resets` (how many resets this worker went through inside
    # run()) are read through __getattr__, not properties, so that a state
    # may hold values of those names, as Horovod's may:
    # TorchState(model, optimizer, commits=0).
    _COUNTERS = {"commits": "_commits", "resets": "_resets"}

    def __getattr__(self, name):
        counter = State._COUNTERS.get(name)
        if counter is not None:
            return self.__dict__.get(counter, 0)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def register_reset_callbacks(self, callbacks):
        """Functions run() calls (in order, without arguments) after every
        reset, once the state is synced: e.g. to scale the learning rate to
        the new size()."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Makes the current values the point to return to after a failure,
        tells the daemon (without waiting), then check_host_updates()."""
        self.save()
        self._commits += 1
        _horovodd.report_commit(self._commits)
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt on every rank (at this same call) when
        the job's membership changed. One tiny collective: call it at the same
        step on every rank."""
        _horovodd.check_host_updates()

    def save(self):
        raise NotImplementedError

    def restore(self):
        raise NotImplementedError

    def sync(self, root_rank=0):
        raise NotImplementedError


class ObjectState(State):
    """State made of picklable Python values, reachable as attributes:
    ObjectState(epoch=0, batch=0).epoch. Saved by deep copy, synced with
    broadcast_object."""

    def __init__(self, **values):
        super().__init__()
        self._value_names = list(values)
        for name, value in values.items():
            setattr(self, name, value)
        self._saved_values = {}
        self.save()

    def save(self):
        self._saved_values = {name: copy.deepcopy(getattr(self, name))
                              for name in self._value_names}

    def restore(self):
        for name, value in self._saved_values.items():
            setattr(self, name, copy.deepcopy(value))

    def sync(self, root_rank=0):
        if not self._value_names:
            return
        values = broadcast_object({name: getattr(self, name) for name in self._value_names},
                                  root_rank)
        for name, value in values.items():
            setattr(self, name, value)


def _choose_sync_root(commits):
    """(the lowest rank among those with the most commits, that count): new
    workers have none, and ranks may differ by one commit after a failure."""
    counts = allgather(np.array([commits], dtype=np.int64))
    root = int(np.argmax(counts))
    return root, int(counts[root])


def run(func):
    """Decorator: func(state, *args, **kwargs) run elastically (see the
    module's description). Returns what func returns."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        after_reset = False
        while True:
            if after_reset:
                flush_std_streams()  # rejoin() ends a removed worker from C++
                _horovodd.rejoin()
                # The new generation has only the global process set.
                process_sets.forget_all()
            try:
                # Every rank syncs, every time: a per-rank choice to skip it
                # deadlocks (Horovod issue 3494). Saving right after makes the
                # synced values everyone's restore point.
                root, commits = _choose_sync_root(state._commits)
                state.sync(root)
                state._commits = commits
                state.save()
                if after_reset:
                    state.on_reset()
                return func(state, *args, **kwargs)
            except HorovodInternalError as error:
                _horovodd.report_failure(str(error))
                state.restore()
            except HostsUpdatedInterrupt:
                pass
            state._resets += 1
            after_reset = True

    return wrapper
