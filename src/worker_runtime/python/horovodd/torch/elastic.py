"""Elastic training for PyTorch: hvd.elastic.run over a TorchState.

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            for state.batch, (x, y) in enumerate(loader):
                ...; optimizer.step(); state.commit()

    state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0)
    train(state)

See horovodd.elastic for what run() does on failures and host updates.
"""

import copy

import torch

from horovodd.elastic import ObjectState, State, run
from horovodd.exceptions import HorovodInternalError, HostsUpdatedInterrupt
from horovodd.ops import broadcast_object
from horovodd.torch.elastic_sampler import ElasticSampler
from horovodd.torch.functions import broadcast_optimizer_state, broadcast_parameters

__all__ = ["State", "ObjectState", "TorchState", "ElasticSampler", "run",
           "HorovodInternalError", "HostsUpdatedInterrupt"]


class _ModelHandler:
    """A torch.nn.Module: its state dict, restored and broadcast in place."""

    @staticmethod
    def save(model):
        return copy.deepcopy(model.state_dict())

    @staticmethod
    def restore(model, saved):
        model.load_state_dict(saved)

    @staticmethod
    def sync(model, root_rank):
        broadcast_parameters(model.state_dict(), root_rank)


class _OptimizerHandler:
    """A torch.optim.Optimizer: per-parameter buffers and hyperparameters."""

    @staticmethod
    def save(optimizer):
        return copy.deepcopy(optimizer.state_dict())

    @staticmethod
    def restore(optimizer, saved):
        optimizer.load_state_dict(saved)

    @staticmethod
    def sync(optimizer, root_rank):
        broadcast_optimizer_state(optimizer, root_rank)


class _SamplerHandler:
    """An ElasticSampler: its progress through the epoch. Loading it also
    re-deals the remaining samples to the current ranks."""

    @staticmethod
    def save(sampler):
        return copy.deepcopy(sampler.state_dict())

    @staticmethod
    def restore(sampler, saved):
        sampler.load_state_dict(saved)

    @staticmethod
    def sync(sampler, root_rank):
        sampler.load_state_dict(broadcast_object(sampler.state_dict(), root_rank))


def _handler_for(value):
    if isinstance(value, torch.nn.Module):
        return _ModelHandler
    if isinstance(value, torch.optim.Optimizer):
        return _OptimizerHandler
    if isinstance(value, ElasticSampler):
        return _SamplerHandler
    return None


class TorchState(ObjectState):
    """State of a PyTorch training program, reachable as attributes:
    state.model, state.optimizer, and every keyword given (state.epoch).

    Models, optimizers and ElasticSamplers (as model=, optimizer= or any
    keyword) are saved through their state dicts and synced in place; other
    values are picklable Python objects, saved by deep copy."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        objects = dict(kwargs)
        if model is not None:
            objects["model"] = model
        if optimizer is not None:
            objects["optimizer"] = optimizer
        # Set before ObjectState.__init__, whose save() uses them.
        self._handled = {name: _handler_for(value) for name, value in objects.items()
                         if _handler_for(value) is not None}
        self._saved_objects = {}
        for name in self._handled:
            setattr(self, name, objects.pop(name))
        super().__init__(**objects)

    def save(self):
        super().save()
        self._saved_objects = {name: handler.save(getattr(self, name))
                               for name, handler in self._handled.items()}

    def restore(self):
        super().restore()
        for name, handler in self._handled.items():
            handler.restore(getattr(self, name), self._saved_objects[name])

    def sync(self, root_rank=0):
        for name, handler in self._handled.items():
            handler.sync(getattr(self, name), root_rank)
        super().sync(root_rank)
