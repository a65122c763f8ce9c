"""Adasum (Maleki et al., "Adasum: Adaptive Summation of Gradients for
Deep Learning Optimization", 2020), the reduction hvd.Adasum names.

Two gradients a and b combine as

    adasum(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b

(their sum when orthogonal, their average when equal), and the ranks
combine recursively in pairs, as Horovod's CPU implementation does: rank
2i with 2i+1, then the results of ranks 4i..4i+1 with 4i+2..4i+3, and so on.
With a rank count that is not a power of two, the ranks past the largest
power of two are first folded into the first ones (rank p+i into rank i).

The engine runs it (gloo_adasum.h: Horovod's vector-halving,
distance-doubling algorithm over pairwise transfers, in float64) for CPU
tensors of ENGINE_DTYPES on a power-of-two number of ranks. Other cases
(another rank count, CUDA tensors, other dtypes) run combine() below over
one allgather, every rank computing the same combination in float64.
"""

# The dtypes the engine's Adasum takes.
ENGINE_DTYPES = ("float16", "bfloat16", "float32", "float64")

import numpy as np


class _AdasumOp:
    """hvd.Adasum: a reduce op the runtime does not know, so the Python
    collectives handle it (see ops.py)."""

    name = "Adasum"

    def __repr__(self):
        return "ReduceOp.Adasum"

    __str__ = __repr__

    def __reduce__(self):
        return "Adasum"  # pickles as this module's singleton


Adasum = _AdasumOp()


def pair(a, b):
    """adasum(a, b) of two float64 vectors; a zero vector leaves the other."""
    dot = float(np.dot(a, b))
    a_norm2, b_norm2 = float(np.dot(a, a)), float(np.dot(b, b))
    a_coefficient = 1.0 - dot / (2.0 * a_norm2) if a_norm2 > 0.0 else 0.0
    b_coefficient = 1.0 - dot / (2.0 * b_norm2) if b_norm2 > 0.0 else 0.0
    if a_norm2 == 0.0:
        return b.copy()
    if b_norm2 == 0.0:
        return a.copy()
    return a_coefficient * a + b_coefficient * b


def combine(vectors):
    """The recursive pairwise combination of `vectors` (one per rank, in
    rank order)."""
    vectors = [np.asarray(v, dtype=np.float64) for v in vectors]
    power = 1
    while power * 2 <= len(vectors):
        power *= 2
    level = [pair(vectors[i], vectors[power + i]) if power + i < len(vectors) else vectors[i]
             for i in range(power)]
    while len(level) > 1:
        level = [pair(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]
