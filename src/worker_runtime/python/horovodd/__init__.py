"""horovodd for Python: Horovod's API over horovodd's C++ worker runtime.

    import horovodd.torch as hvd      # PyTorch (also takes numpy arrays)
    import horovodd as hvd            # numpy arrays only, no torch import

Run the program through horovodrun, which launches the workers and sets the
environment init() reads.
"""

from horovodd.basics import (
    cross_rank,
    cross_size,
    generation,
    init,
    is_initialized,
    local_rank,
    local_size,
    rank,
    shutdown,
    size,
)
from horovodd.compression import Compression
from horovodd.exceptions import HorovodInternalError, HostsUpdatedInterrupt
from horovodd.ops import (
    Average,
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
    grouped_allreduce,
    grouped_allreduce_,
    grouped_allreduce_async,
    grouped_allreduce_async_,
    poll,
    reducescatter,
    reducescatter_async,
    synchronize,
)
from horovodd import elastic
