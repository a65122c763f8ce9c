"""Making every rank start from the same model and optimizer."""

import torch

from horovodd.basics import rank
from horovodd.ops import broadcast_, broadcast_object


def broadcast_parameters(params, root_rank=0, prefix=None):
    """Overwrites tensors in place with root_rank's: `params` is a state dict
    (model.state_dict(), broadcast in name order) or a sequence of (name,
    tensor) pairs (model.named_parameters(), in the order given). `prefix`
    is put before each name in the requests, as in Horovod."""
    if isinstance(params, dict):
        items = sorted(params.items())
    else:
        items = list(params)
        for item in items:
            if not (isinstance(item, tuple) and len(item) == 2):
                raise ValueError("broadcast_parameters takes a state dict or (name, tensor) "
                                 f"pairs such as model.named_parameters(), got an item "
                                 f"{type(item).__name__}")
    for name, tensor in items:
        if tensor is None:
            continue
        if not isinstance(tensor, torch.Tensor):
            raise ValueError(f"broadcast_parameters: '{name}' is a {type(tensor).__name__}, "
                             "not a tensor")
        broadcast_(tensor, root_rank, f"{prefix or ''}{name}")


def _initialize_state(optimizer):
    """A new optimizer has no state yet (it makes it in its first step):
    as Horovod does, give every parameter that requires a gradient a zero
    one (sparse for SparseAdam) and take one step of the wrapped optimizer,
    without DistributedOptimizer's reduction (no collective: the ranks need
    not all be here). Frozen parameters keep no gradient and get no state."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.requires_grad:
                p.grad = torch.zeros_like(p)
                if isinstance(optimizer, torch.optim.SparseAdam):
                    p.grad = p.grad.to_sparse()
    from horovodd.torch.optimizer import _DistributedOptimizerMixin
    if isinstance(optimizer, _DistributedOptimizerMixin):
        super(_DistributedOptimizerMixin, optimizer).step()
    else:
        optimizer.step()


def broadcast_optimizer_state(optimizer, root_rank=0, prefix="Parameter.", model=None):
    """Makes every rank's optimizer state (per-parameter buffers such as
    momentum, and each group's hyperparameters such as lr) root_rank's.

    As in Horovod: an optimizer without state yet first makes it (zero
    gradients for the parameters that require one, one step); one that has
    none even then (plain SGD) is left as it is; torch.optim.LBFGS is
    refused. `prefix` and `model` are Horovod's (names for its requests)
    and not needed here."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError("broadcast_optimizer_state takes a torch.optim.Optimizer, got "
                         f"{type(optimizer).__name__}")
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    if not optimizer.state_dict()["state"]:
        _initialize_state(optimizer)
        if not optimizer.state_dict()["state"]:
            return  # a stateless optimizer: nothing to broadcast (Horovod's rule)
    state_dict = broadcast_object(optimizer.state_dict(), root_rank)
    if rank() != root_rank:
        optimizer.load_state_dict(state_dict)
