"""ElasticSampler: a data set's samples split among the ranks so that every
sample is trained on once per epoch, however the job's membership changes."""

import math

import torch

from horovodd.basics import rank, size


class ElasticSampler(torch.utils.data.Sampler):
    """Yields this rank's share of the epoch's samples not processed yet.

    Each epoch is a permutation of the data set (from seed + epoch when
    shuffling). After `processed_num` of its samples, the rest is dealt out
    round robin: rank r gets positions r, r + size(), ... of the remainder,
    so batch b of every rank together cover the next batch_size * size()
    samples. Call record_batch(b, batch_size) after training on batch b, and
    commit: the state (epoch, processed_num) is the same on every rank, and
    a reset continues the epoch from the last commit on the new ranks.

    Ranks whose share is one sample short are padded with a repeat so that
    every rank runs the same number of batches; get_indices() leaves padding
    out, so a training loop can weigh it out of the loss.
    """

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_num = 0
        self.reset()

    def set_epoch(self, epoch):
        """Starts epoch `epoch` from its first sample."""
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def reset(self):
        """Recomputes this rank's share for the current rank and size (the
        elastic state handler calls it after every reset)."""
        self.rank = rank()
        self.num_replicas = size()
        count = len(self.dataset)
        if self.shuffle:
            generator = torch.Generator()
            generator.manual_seed(self.seed + self.epoch)
            order = torch.randperm(count, generator=generator).tolist()
        else:
            order = list(range(count))
        remaining = order[self.processed_num:]
        self._pass_start = self.processed_num
        self._pass_length = len(remaining)
        self._real = remaining[self.rank::self.num_replicas]
        self.num_samples = math.ceil(len(remaining) / self.num_replicas)
        padding = self.num_samples - len(self._real)
        self.indices = self._real + remaining[:1] * padding

    def __iter__(self):
        return iter(list(self.indices))

    def __len__(self):
        return self.num_samples

    def get_indices(self, batch_idx, batch_size):
        """The data set indices of this rank's batch `batch_idx` (counted from
        the last reset or set_epoch), padding left out."""
        return self._real[batch_idx * batch_size:(batch_idx + 1) * batch_size]

    def record_batch(self, batch_idx, batch_size):
        """Marks batches 0..batch_idx (counted from the last reset or
        set_epoch) of every rank as processed."""
        done = min(self._pass_length, (batch_idx + 1) * batch_size * self.num_replicas)
        self.processed_num = self._pass_start + done

    def state_dict(self):
        return {"epoch": self.epoch, "processed_num": self.processed_num}

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_num = state_dict["processed_num"]
        self.reset()
