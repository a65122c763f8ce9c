"""SyncBatchNorm: batch normalization whose batch statistics are those of
the whole job's batch (every rank's samples), in forward and backward, as
Horovod's hvd.SyncBatchNorm.

In training each forward pass sums, per channel, the sample count, the sum
and the sum of squares over every rank (one allreduce), normalizes with the
combined mean and (biased) variance, and updates the running statistics
with them (unbiased variance, as torch.nn.BatchNorm does); backward sums the
two per-channel gradient reductions over every rank the same way. The
result on each rank equals plain BatchNorm over the concatenation of the
ranks' batches on one process. In eval mode (or with one rank) it is plain
BatchNorm. The gradients of weight and bias are this rank's share (the
DistributedOptimizer reduces them like any other).
"""

import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from horovodd.ops import Sum
from horovodd.process_sets import global_process_set


def _allreduce_sum(tensor, process_set):
    # horovodd.ops directly: these reductions are not recorded by autograd.
    from horovodd import ops
    return ops.allreduce(tensor.contiguous(), op=Sum, process_set=process_set)


def _set_size(process_set):
    from horovodd import ops
    return ops._set_size(process_set)


class _SyncBatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_var, eps, momentum,
                process_set):
        channels = input.shape[1]
        # (N, C, *) -> (C, everything else)
        flat = input.transpose(0, 1).reshape(channels, -1).to(torch.float64)
        count = torch.full((1,), float(flat.shape[1]), dtype=torch.float64)
        stats = torch.cat([count, flat.sum(dim=1), (flat * flat).sum(dim=1)])
        stats = _allreduce_sum(stats, process_set)
        total = stats[0]
        mean = stats[1:1 + channels] / total
        var = stats[1 + channels:] / total - mean * mean
        var = var.clamp(min=0.0)
        invstd = 1.0 / torch.sqrt(var + eps)

        if running_mean is not None:
            with torch.no_grad():
                unbiased = var * total / max(float(total) - 1.0, 1.0)
                running_mean.mul_(1.0 - momentum).add_(momentum * mean.to(running_mean.dtype))
                running_var.mul_(1.0 - momentum).add_(momentum * unbiased.to(running_var.dtype))

        shape = [1, channels] + [1] * (input.dim() - 2)
        mean_b = mean.to(input.dtype).view(shape)
        invstd_b = invstd.to(input.dtype).view(shape)
        normalized = (input - mean_b) * invstd_b
        output = normalized
        if weight is not None:
            output = output * weight.view(shape)
        if bias is not None:
            output = output + bias.view(shape)
        ctx.save_for_backward(normalized, weight, invstd_b)
        ctx.total = float(total)
        ctx.process_set = process_set
        ctx.has_bias = bias is not None
        return output

    @staticmethod
    def backward(ctx, grad_output):
        normalized, weight, invstd_b = ctx.saved_tensors
        channels = grad_output.shape[1]
        dims = [0] + list(range(2, grad_output.dim()))
        # Per channel, over this rank's samples: sum(dy), sum(dy * x_hat).
        sum_dy = grad_output.sum(dim=dims)
        sum_dy_xhat = (grad_output * normalized).sum(dim=dims)
        grad_weight = sum_dy_xhat if weight is not None else None
        grad_bias = sum_dy if ctx.has_bias else None
        grad_input = None
        if ctx.needs_input_grad[0]:
            both = _allreduce_sum(torch.cat([sum_dy, sum_dy_xhat]).to(torch.float64),
                                  ctx.process_set)
            shape = [1, channels] + [1] * (grad_output.dim() - 2)
            mean_dy = (both[:channels] / ctx.total).to(grad_output.dtype).view(shape)
            mean_dy_xhat = (both[channels:] / ctx.total).to(grad_output.dtype).view(shape)
            scale = invstd_b if weight is None else invstd_b * weight.view(shape)
            grad_input = (grad_output - mean_dy - normalized * mean_dy_xhat) * scale
        return grad_input, grad_weight, grad_bias, None, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    """Batch normalization over every rank's batch (see the module's
    description). Takes Horovod's arguments: num_features, eps=1e-5,
    momentum=0.1, affine=True, track_running_stats=True; and process_set to
    synchronize over a process set's ranks only."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_set=global_process_set):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_set = process_set

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def _run_bn(self, input, momentum):
        return F.batch_norm(input, self.running_mean, self.running_var, self.weight,
                            self.bias, self.training or not self.track_running_stats,
                            momentum, self.eps)

    def forward(self, input):
        self._check_input_dim(input)
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked += 1
            if self.momentum is None:  # a cumulative moving average
                momentum = 1.0 / float(self.num_batches_tracked)
        if not self.training or _set_size(self.process_set) == 1:
            return self._run_bn(input, momentum)
        running = self.track_running_stats
        return _SyncBatchNormFunction.apply(
            input, self.weight, self.bias, self.running_mean if running else None,
            self.running_var if running else None, self.eps, momentum, self.process_set)
