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


def broadcast_optimizer_state(optimizer, root_rank=0, prefix="Parameter.", model=None):
    """Makes every rank's optimizer state (per-parameter buffers such as
    momentum, and each group's hyperparameters such as lr) root_rank's.
    `prefix` and `model` are Horovod's (names for its requests) and not
    needed here."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError("broadcast_optimizer_state takes a torch.optim.Optimizer, got "
                         f"{type(optimizer).__name__}")
    state_dict = broadcast_object(optimizer.state_dict(), root_rank)
    if rank() != root_rank:
        optimizer.load_state_dict(state_dict)
