"""Run directly (no job): ElasticSampler's bookkeeping, with rank() and size()
stood in for, through an epoch whose membership changes twice (3 ranks, then
2 after a failure restored the last commit, then 4). Every sample must be
trained on exactly once, every rank of a generation must run the same number
of batches, and padding must stay out of get_indices(). Prints "sampler ok"."""

import sys

import horovodd.torch.elastic_sampler as elastic_sampler

SAMPLES = 103
BATCH = 4


class Membership:
    """Stands in for horovodd's rank() and size() in the sampler module."""

    def __init__(self):
        self.rank, self.size = 0, 1
        elastic_sampler.rank = lambda: self.rank
        elastic_sampler.size = lambda: self.size


def ranks(membership, size, state):
    """One sampler per rank of a generation of `size`, loaded from `state`."""
    samplers = []
    for r in range(size):
        membership.rank, membership.size = r, size
        sampler = elastic_sampler.ElasticSampler(range(SAMPLES), shuffle=True, seed=5)
        sampler.load_state_dict(state)
        samplers.append(sampler)
    return samplers


def train(samplers, batches, seen):
    """Trains `batches` steps (None: to the end of the pass) on every rank;
    returns the samplers' common state."""
    lengths = {len(list(s)) for s in samplers}
    assert len(lengths) == 1, f"ranks would run different numbers of samples: {lengths}"
    total = -(-lengths.pop() // BATCH)
    for batch in range(total if batches is None else batches):
        for sampler in samplers:
            real = sampler.get_indices(batch, BATCH)
            yielded = list(sampler)[batch * BATCH:(batch + 1) * BATCH]
            assert yielded[:len(real)] == real, (yielded, real)
            seen.extend(real)
            sampler.record_batch(batch, BATCH)
    states = {tuple(sorted(s.state_dict().items())) for s in samplers}
    assert len(states) == 1, f"ranks disagree on the sampler state: {states}"
    return samplers[0].state_dict()


def main():
    membership = Membership()
    seen = []
    start = {"epoch": 2, "processed_num": 0}
    committed = train(ranks(membership, 3, start), 3, seen)
    # A failure: 2 uncommitted batches are lost and redone after the restore.
    lost = []
    train(ranks(membership, 3, committed), 2, lost)
    state = train(ranks(membership, 2, committed), 5, seen)
    state = train(ranks(membership, 4, state), None, seen)
    assert state["processed_num"] == SAMPLES, state
    assert sorted(seen) == list(range(SAMPLES)), (
        f"{len(seen)} samples trained, {len(set(seen))} distinct, of {SAMPLES}")
    # A new epoch starts over, in a different order.
    membership.rank, membership.size = 0, 1
    sampler = elastic_sampler.ElasticSampler(range(SAMPLES), shuffle=True, seed=5)
    sampler.set_epoch(3)
    epoch3 = list(sampler)
    sampler.set_epoch(2)
    assert sorted(epoch3) == list(range(SAMPLES)) and epoch3 != list(sampler)
    print("sampler ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
