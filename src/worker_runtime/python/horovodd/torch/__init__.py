"""horovodd.torch: Horovod's PyTorch API over horovodd's worker runtime.

    import horovodd.torch as hvd
    hvd.init()
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)

The collectives take torch tensors (and numpy arrays) and return the same
kind; contiguous CPU tensors are used in place, without copies. Those
Horovod makes differentiable are (horovodd/torch/mpi_ops.py). Scripts
written for Horovod import the same module as `horovod.torch`. Elastic
training lives in horovodd.torch.elastic (hvd.elastic.run, TorchState,
ElasticSampler).
"""

import torch  # noqa: F401  (loaded first, so horovodd's ops recognize torch tensors)

from horovodd import (
    Adasum,
    add_process_set,
    allgather_async,
    allgather_object,
    allreduce_,
    allreduce_async,
    allreduce_async_,
    alltoall_async,
    Average,
    barrier,
    broadcast_,
    broadcast_async,
    broadcast_async_,
    broadcast_object,
    ccl_built,
    CollectiveArgumentError,
    Compression,
    cross_rank,
    cross_size,
    cuda_built,
    ddl_built,
    generation,
    global_process_set,
    gloo_built,
    gloo_enabled,
    grouped_allgather_async,
    grouped_allreduce_,
    grouped_allreduce_async,
    grouped_allreduce_async_,
    grouped_reducescatter_async,
    HorovodInternalError,
    HostsUpdatedInterrupt,
    init,
    is_homogeneous,
    is_initialized,
    join,
    local_rank,
    local_size,
    Max,
    Min,
    mpi_built,
    mpi_enabled,
    mpi_threads_supported,
    nccl_built,
    poll,
    ProcessSet,
    Product,
    rank,
    reducescatter_async,
    remove_process_set,
    rocm_built,
    shutdown,
    size,
    start_timeline,
    stop_timeline,
    Sum,
    synchronize,
)
from horovodd.torch.mpi_ops import (
    allgather,
    allreduce,
    alltoall,
    broadcast,
    grouped_allgather,
    grouped_allreduce,
    grouped_reducescatter,
    reducescatter,
    sparse_allreduce_async,
)
from horovodd.torch.functions import broadcast_optimizer_state, broadcast_parameters
from horovodd.torch.optimizer import DistributedOptimizer
from horovodd.torch.sync_batch_norm import SyncBatchNorm
from horovodd.torch import elastic
