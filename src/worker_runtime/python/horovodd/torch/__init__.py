"""horovodd.torch: Horovod's PyTorch API over horovodd's worker runtime.

    import horovodd.torch as hvd
    hvd.init()
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)

The collectives take torch tensors (and numpy arrays) and return the same
kind; contiguous CPU tensors are used in place, without copies. Elastic
training lives in horovodd.torch.elastic (hvd.elastic.run, TorchState,
ElasticSampler).
"""

import torch  # noqa: F401  (loaded first, so horovodd's ops recognize torch tensors)

from horovodd import (
    Average,
    Compression,
    HorovodInternalError,
    HostsUpdatedInterrupt,
    Max,
    Min,
    Product,
    Sum,
    allgather,
    allgather_async,
    allgather_object,
    allreduce,
    allreduce_,
    allreduce_async,
    allreduce_async_,
    alltoall,
    alltoall_async,
    barrier,
    broadcast,
    broadcast_,
    broadcast_async,
    broadcast_async_,
    broadcast_object,
    cross_rank,
    cross_size,
    generation,
    grouped_allreduce,
    grouped_allreduce_,
    grouped_allreduce_async,
    grouped_allreduce_async_,
    init,
    is_initialized,
    local_rank,
    local_size,
    poll,
    rank,
    reducescatter,
    reducescatter_async,
    shutdown,
    size,
    synchronize,
)
from horovodd.torch.functions import broadcast_optimizer_state, broadcast_parameters
from horovodd.torch.optimizer import DistributedOptimizer
from horovodd.torch import elastic
