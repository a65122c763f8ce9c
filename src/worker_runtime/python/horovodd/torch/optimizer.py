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
from horovodd.ops import Average, allreduce_async_, synchronize as synchronize_handle


class _DistributedOptimizerMixin:
    """Put in front of the wrapped optimizer's class, so the result still is
    an instance of it (schedulers and isinstance checks keep working)."""

    def __init__(self, param_groups, named_parameters, compression,
                 backward_passes_per_step, op, gradient_predivide_factor):
        super().__init__(param_groups)
        if backward_passes_per_step < 1:
            raise ValueError("backward_passes_per_step must be at least 1, got "
                             f"{backward_passes_per_step}")
        if gradient_predivide_factor != 1.0 and op != Average:
            raise ValueError("gradient_predivide_factor needs op=Average, got "
                             f"op={op} with gradient_predivide_factor="
                             f"{gradient_predivide_factor}")
        self._compression = compression
        self._op = op
        self._predivide = float(gradient_predivide_factor)
        self.backward_passes_per_step = backward_passes_per_step
        # Owned by the training thread (the hooks run on it inside backward()).
        self._names = self._parameter_names(named_parameters)
        self._trained = [p for group in self.param_groups for p in group["params"]
                         if p.requires_grad]
        self._passes_left = {p: backward_passes_per_step for p in self._trained}
        self._pending = {}  # parameter -> (handle, compression context, tensor sent)
        self._synchronized = False
        self._should_synchronize = True
        # The accumulators must outlive this call for their hooks to stay.
        self._accumulators = [self._hook_gradient(p) for p in self._trained]

    def _parameter_names(self, named_parameters):
        params = [p for group in self.param_groups for p in group["params"]]
        if named_parameters is None:
            return {p: f"parameter.{i}" for i, p in enumerate(params)}
        named = list(named_parameters)
        for item in named:
            if not (isinstance(item, tuple) and len(item) == 2):
                raise ValueError("named_parameters must be (name, parameter) pairs such as "
                                 f"model.named_parameters(), got an item {type(item).__name__}")
        names, seen = {}, set()
        for name, p in named:
            if name in seen:
                raise ValueError(f"named_parameters names '{name}' twice")
            seen.add(name)
            names[p] = name
        unnamed = [i for i, p in enumerate(params) if p not in names]
        if unnamed:
            raise ValueError(f"{len(unnamed)} of the optimizer's parameters are not in "
                             f"named_parameters (positions {unnamed[:10]})")
        return names

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
                f"the gradient of '{self._names[p]}' was computed more than "
                f"backward_passes_per_step={self.backward_passes_per_step} times before "
                "step(): raise backward_passes_per_step to accumulate more passes locally")
        self._passes_left[p] = left
        if left == 0:
            self._pending[p] = self._send_gradient(p)

    def _send_gradient(self, p):
        if self._op == Average:
            # Average divides by size() itself, after the postscale.
            prescale, postscale = 1.0 / self._predivide, self._predivide
        else:
            prescale, postscale = 1.0, 1.0
        sent, context = self._compression.compress(p.grad)
        handle = allreduce_async_(sent, name=self._names[p], op=self._op,
                                  prescale_factor=prescale, postscale_factor=postscale)
        return handle, context, sent

    def synchronize(self):
        """Finishes the allreduce of every gradient; p.grad then holds the
        reduction over all ranks."""
        unsent = sorted((p for p in self._trained if p not in self._pending),
                        key=lambda p: self._names[p])
        for p in unsent:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            self._pending[p] = self._send_gradient(p)
        pending, self._pending = self._pending, {}
        self._passes_left = {p: self.backward_passes_per_step for p in self._trained}
        first_error = None
        for p, (handle, context, sent) in pending.items():
            try:
                reduced = synchronize_handle(handle)
            except Exception as error:  # every handle is collected; the first error raised
                first_error = first_error or error
                continue
            if sent is not p.grad:
                p.grad.copy_(self._compression.decompress(reduced, context))
        if first_error is not None:
            raise first_error
        self._synchronized = True

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
                warnings.warn("optimizer.step() after optimizer.synchronize() without "
                              "optimizer.skip_synchronize(): the gradients were reduced "
                              "twice")
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
                         gradient_predivide_factor=1.0):
    """Wraps `optimizer` so that step() uses gradients reduced over all ranks
    (averaged by default).

    named_parameters: model.named_parameters(), for names in errors.
    compression: Compression.fp16 sends float gradients as float16.
    backward_passes_per_step: backward passes accumulated locally (summed)
      before a gradient is reduced.
    op: Average (default), Sum, Min, Max or Product.
    gradient_predivide_factor: with Average, divide gradients by this before
      the sum and by size()/factor after it.

    The result is an instance of `optimizer`'s class with its parameter
    groups and state.
    """
    base = optimizer.__class__
    distributed_class = type(base.__name__, (_DistributedOptimizerMixin, base), {})
    distributed = distributed_class(
        [dict(group) for group in optimizer.param_groups], named_parameters, compression,
        backward_passes_per_step, op, gradient_predivide_factor)
    distributed.load_state_dict(optimizer.state_dict())
    return distributed
