"""DistributedOptimizer: a torch optimizer whose gradients are averaged over
all ranks before each step.

A hook on each parameter's gradient accumulator queues the gradient's
allreduce on the runtime's engine as soon as backward() has produced it
(after `backward_passes_per_step` passes), so the reductions of the last
layers run while backward() still computes the first ones, fused into a few
collectives. step() (or synchronize()) first sends the gradients whose hook
did not fire (parameters unused in this backward pass), in name order, then
waits for all. Ranks match gradients by parameter name, as with Horovod.
"""

import contextlib
import warnings

import torch

from horovodd.compression import Compression
from horovodd.ops import (Average, Sum, allreduce_async_, grouped_allreduce_async_,
                          synchronize as synchronize_handle)
from horovodd.process_sets import global_process_set
from horovodd.torch.mpi_ops import sparse_allreduce_async


class _DistributedOptimizerMixin:
    """Put in front of the wrapped optimizer's class, so the result still is
    an instance of it (schedulers and isinstance checks keep working)."""

    def __init__(self, param_groups, named_parameters, compression,
                 backward_passes_per_step, op, gradient_predivide_factor, num_groups,
                 groups, sparse_as_dense, process_set):
        super().__init__(param_groups)
        if backward_passes_per_step < 1:
            raise ValueError("backward_passes_per_step must be at least 1, got "
                             f"{backward_passes_per_step}")
        if gradient_predivide_factor != 1.0 and op != Average:
            raise ValueError("gradient_predivide_factor needs op=Average, got "
                             f"op={op} with gradient_predivide_factor="
                             f"{gradient_predivide_factor}")
        if num_groups and groups is not None:
            raise ValueError("pass either num_groups or groups to DistributedOptimizer, "
                             "not both")
        self._compression = compression
        self._op = op
        self._predivide = float(gradient_predivide_factor)
        self._sparse_as_dense = bool(sparse_as_dense)
        self._process_set = process_set
        self.backward_passes_per_step = backward_passes_per_step
        # Owned by the training thread (the hooks run on it inside backward()).
        # parameter -> the name its gradient's requests carry (Horovod's
        # attribute: scripts and tools read it).
        self._parameter_names = self._name_parameters(named_parameters)
        self._trained = [p for group in self.param_groups for p in group["params"]
                         if p.requires_grad]
        self._group_of, self._groups = self._gradient_groups(num_groups, groups)
        self._passes_left = {p: backward_passes_per_step for p in self._trained}
        # parameter -> (handle, compression context, tensor sent); the
        # members of a gradient group share one entry, under each member.
        self._pending = {}
        self._ready = {}  # group index -> parameters whose gradient is ready
        self._synchronized = False
        self._should_synchronize = True
        # The accumulators must outlive this call for their hooks to stay.
        # Ranks outside the process set reduce nothing: as in Horovod, their
        # gradients get no hooks and step() uses them as they are.
        self._accumulators = [self._hook_gradient(p) for p in self._trained] \
            if self._in_process_set() else []

    def _name_parameters(self, named_parameters):
        """{parameter: name}, Horovod's `_parameter_names`: the names given,
        or, without named_parameters, Horovod's generated ones,
        allreduce.noname.<group index>.<index in the group>, the same on
        every rank that builds the optimizer from the same model."""
        if named_parameters is None:
            return {p: f"allreduce.noname.{i}.{j}"
                    for i, group in enumerate(self.param_groups)
                    for j, p in enumerate(group["params"])}
        named = list(named_parameters)
        if not all(isinstance(item, tuple) and len(item) == 2 for item in named):
            raise ValueError("named_parameters should be a sequence of tuples (name, parameter), "
                             "usually produced by model.named_parameters().")
        seen, duplicates = set(), set()
        for name, _ in named:
            (duplicates if name in seen else seen).add(name)
        if duplicates:
            raise ValueError("Parameter names in named_parameters must be unique. Found "
                             f"duplicates: {', '.join(sorted(duplicates))}")
        names = {p: name for name, p in named}
        params = [p for group in self.param_groups for p in group["params"]]
        unnamed = [i for i, p in enumerate(params) if p not in names]
        if unnamed:
            raise ValueError("named_parameters was specified, but one or more model parameters "
                             f"were not named: {len(unnamed)} of the optimizer's parameters are "
                             f"not in named_parameters (positions {unnamed[:10]}). Python object "
                             f"ids: {', '.join(str(id(params[i])) for i in unnamed)}")
        return names

    def _gradient_groups(self, num_groups, groups):
        """(parameter -> group index, the groups as lists of parameters):
        Horovod's num_groups (the parameters, in the optimizer's order, cut
        into that many consecutive pieces) or groups (lists of parameters;
        the rest stay alone). A group's gradients are reduced in one request
        once all of them are ready."""
        if groups is not None:
            if not isinstance(groups, (list, tuple)) or \
                    not all(isinstance(g, (list, tuple)) for g in groups):
                raise ValueError("groups must be a list of lists of parameters")
            chosen = [[p for p in g if p.requires_grad] for g in groups]
            trained = set(self._trained)
            for g in chosen:
                for p in g:
                    if p not in trained:
                        raise ValueError("groups names a parameter the optimizer does not "
                                         "train")
        elif num_groups:
            if num_groups < 0:
                raise ValueError(f"num_groups must not be negative, got {num_groups}")
            count = min(int(num_groups), len(self._trained))
            size, extra = divmod(len(self._trained), max(count, 1))
            chosen, start = [], 0
            for index in range(count):
                end = start + size + (1 if index < extra else 0)
                chosen.append(self._trained[start:end])
                start = end
        else:
            return {}, []
        group_of = {}
        for index, members in enumerate(chosen):
            for p in members:
                if p in group_of:
                    raise ValueError(f"parameter '{self._parameter_names[p]}' is in two groups")
                group_of[p] = index
        return group_of, chosen

    def _hook_gradient(self, p):
        # The node that accumulates p's gradient: its hook runs once p.grad
        # holds this backward pass's contribution.
        with torch.enable_grad():
            accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
        accumulator.register_hook(lambda *unused: self._on_gradient(p))
        return accumulator

    def _on_gradient(self, p):
        left = self._passes_left[p] - 1
        if left < 0:
            raise RuntimeError(
                f"the gradient of '{self._parameter_names[p]}' was computed more than "
                f"backward_passes_per_step={self.backward_passes_per_step} times before "
                "step(): raise backward_passes_per_step to accumulate more passes locally")
        self._passes_left[p] = left
        if left != 0:
            return
        group = self._group_of.get(p)
        if group is None:
            self._pending[p] = self._send_gradient(p)
            return
        ready = self._ready.setdefault(group, set())
        ready.add(p)
        if len(ready) == len(self._groups[group]):
            self._send_group(group)

    def _scale_factors(self):
        if self._op == Average:
            # Average divides by the set's size itself, after the postscale.
            return 1.0 / self._predivide, self._predivide
        return 1.0, 1.0

    def _gradient_to_send(self, p):
        """p.grad, or with sparse_as_dense a dense copy of a sparse one:
        p.grad stays sparse (optimizers such as SparseAdam take nothing
        else) and gets the reduction back as a sparse tensor, as in
        Horovod."""
        if p.grad.is_sparse and self._sparse_as_dense:
            return p.grad.to_dense()
        return p.grad

    @staticmethod
    def _store_dense(p, reduced):
        if p.grad.is_sparse:
            p.grad = reduced.to_sparse(p.grad.sparse_dim())
        elif reduced is not p.grad:
            p.grad.copy_(reduced)

    def _send_gradient(self, p):
        grad = self._gradient_to_send(p)
        if grad.is_sparse:
            if self._op not in (Average, Sum):
                raise ValueError(f"sparse gradients ('{self._parameter_names[p]}') are reduced "
                                 f"with Average or Sum, not {self._op}: pass "
                                 "sparse_as_dense=True")
            handle = sparse_allreduce_async(grad, self._parameter_names[p], self._op,
                                            self._process_set)
            return handle, None, None
        prescale, postscale = self._scale_factors()
        sent, context = self._compression.compress(grad)
        handle = allreduce_async_(sent, name=self._parameter_names[p], op=self._op,
                                  prescale_factor=prescale, postscale_factor=postscale,
                                  process_set=self._process_set)
        return handle, context, sent

    def _send_group(self, group):
        members = self._groups[group]
        self._ready.pop(group, None)
        grads = [self._gradient_to_send(p) for p in members]
        if any(g.is_sparse for g in grads):
            raise ValueError("gradient groups hold dense gradients only: pass "
                             "sparse_as_dense=True for sparse ones")
        prescale, postscale = self._scale_factors()
        compressed = [self._compression.compress(g) for g in grads]
        sent = [c for c, _ in compressed]
        handle = grouped_allreduce_async_(
            sent, name=f"group.{group}.{self._parameter_names[members[0]]}", op=self._op,
            prescale_factor=prescale, postscale_factor=postscale,
            process_set=self._process_set)
        entry = (handle, [context for _, context in compressed], sent)
        for p in members:
            self._pending[p] = entry

    def _in_process_set(self):
        return self._process_set is None or self._process_set is global_process_set or \
            self._process_set.included()

    def synchronize(self):
        """Finishes the allreduce of every gradient; p.grad then holds the
        reduction over all ranks (of the process set). On a rank outside the
        process set it does nothing, as in Horovod."""
        if not self._in_process_set():
            self._synchronized = True
            return
        unsent = sorted((p for p in self._trained if p not in self._pending),
                        key=lambda p: self._parameter_names[p])
        for p in unsent:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        for p in unsent:
            if p in self._pending:
                continue  # sent with its group below
            group = self._group_of.get(p)
            if group is None:
                self._pending[p] = self._send_gradient(p)
            else:
                self._send_group(group)
        pending, self._pending = self._pending, {}
        self._ready = {}
        self._passes_left = {p: self.backward_passes_per_step for p in self._trained}
        first_error = None
        done = set()
        for p, (handle, context, sent) in pending.items():
            if id(handle) in done:
                continue
            done.add(id(handle))
            try:
                reduced = synchronize_handle(handle)
            except Exception as error:  # every handle is collected; the first error raised
                first_error = first_error or error
                continue
            self._store_reduced(p, reduced, context, sent)
        if first_error is not None:
            raise first_error
        self._synchronized = True

    def _store_reduced(self, p, reduced, context, sent):
        group = self._group_of.get(p)
        if group is not None:
            for member, r, c in zip(self._groups[group], reduced, context):
                self._store_dense(member, self._compression.decompress(r, c))
            return
        if sent is None:  # a sparse gradient: the reduction replaces it
            p.grad = reduced
        else:
            self._store_dense(p, self._compression.decompress(reduced, context))

    @contextlib.contextmanager
    def skip_synchronize(self):
        """Inside it, step() does not synchronize: for calling synchronize()
        yourself first (e.g. to clip the reduced gradients)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without "
                              "optimizer.skip_synchronize() context after "
                              "optimizer.synchronize(). This can cause training "
                              "slowdown. You may want to consider using "
                              "optimizer.skip_synchronize() context if you use "
                              "optimizer.synchronize() in your code.")
            self.synchronize()
        self._synchronized = False
        return super().step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._pending:
            raise RuntimeError("optimizer.zero_grad() was called after loss.backward() but "
                               "before optimizer.step() or optimizer.synchronize(): the "
                               "gradients being reduced would be lost")
        return super().zero_grad(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average,
                         gradient_predivide_factor=1.0, num_groups=0, groups=None,
                         sparse_as_dense=False, process_set=global_process_set):
    """Wraps `optimizer` so that step() uses gradients reduced over all ranks
    (averaged by default), as Horovod's.

    named_parameters: model.named_parameters(), for the requests' names.
    compression: Compression.fp16 sends float gradients as float16.
    backward_passes_per_step: backward passes accumulated locally (summed)
      before a gradient is reduced.
    op: Average (default), Sum, Adasum, Min, Max or Product. Adasum combines
      the ranks' gradients with Adasum (for plain SGD the same as Horovod's
      Adasum optimizer, which combines the updates).
    gradient_predivide_factor: with Average, divide gradients by this before
      the sum and by size()/factor after it.
    num_groups / groups: reduce the gradients in that many groups, or in the
      groups of parameters given, one request per group.
    sparse_as_dense: reduce sparse gradients (embeddings) as dense tensors;
      otherwise they go through sparse_allreduce_async.
    process_set: reduce over this set's ranks only; on the other ranks the
      optimizer reduces nothing (step() uses their own gradients).

    The result is an instance of `optimizer`'s class with its parameter
    groups and state.
    """
    base = optimizer.__class__
    distributed_class = type(base.__name__, (_DistributedOptimizerMixin, base), {})
    distributed = distributed_class(
        [dict(group) for group in optimizer.param_groups], named_parameters, compression,
        backward_passes_per_step, op, gradient_predivide_factor, num_groups, groups,
        sparse_as_dense, process_set)
    distributed.load_state_dict(optimizer.state_dict())
    return distributed
