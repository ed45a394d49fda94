"""The randomness of a run: one ``SeedSequence`` per epoch and per block, never spawned.

A run is a function of (root seed, epoch) only, which is what makes a resumed run equal an
uninterrupted one and a replay after a lost worker give the same bits.
"""

from __future__ import annotations

import numpy as np

__all__ = ["block_seeds", "epoch_seed"]


def epoch_seed(seed: np.random.SeedSequence, epoch: int) -> np.random.SeedSequence:
    """Return the ``SeedSequence`` of one epoch.

    It is the ``epoch``-th child that ``seed.spawn`` would return on a fresh ``seed``
    (epoch 1 is child 0), computed without touching ``seed``'s spawn counter, so the
    randomness of an epoch depends only on the root entropy and the epoch number (which is
    what makes a resumed run equal an uninterrupted one).

    Parameters
    ----------
    seed : numpy.random.SeedSequence
        Root seed of the run.
    epoch : int
        Epoch number, >= 1.

    Returns
    -------
    numpy.random.SeedSequence
    """
    if epoch < 1:
        raise ValueError(f"epoch must be >= 1, got {epoch}")
    return np.random.SeedSequence(
        seed.entropy, spawn_key=tuple(seed.spawn_key) + (epoch - 1,), pool_size=seed.pool_size
    )


def block_seeds(seed: np.random.SeedSequence, n_blocks: int) -> list:
    """Return ``n_blocks`` child seeds of ``seed`` (child b for block b), without spawning.

    Parameters
    ----------
    seed : numpy.random.SeedSequence
        Usually an :func:`epoch_seed`.
    n_blocks : int
        Number of blocks (or tiles).

    Returns
    -------
    list of numpy.random.SeedSequence
    """
    return [
        np.random.SeedSequence(
            seed.entropy, spawn_key=tuple(seed.spawn_key) + (b,), pool_size=seed.pool_size
        )
        for b in range(int(n_blocks))
    ]


def _root_seed(random_state) -> np.random.SeedSequence:
    if isinstance(random_state, np.random.SeedSequence):
        return random_state
    if random_state is None:
        return np.random.SeedSequence()
    if isinstance(random_state, np.random.Generator | np.random.RandomState):
        raise ValueError(
            "random_state must be an int, None or a numpy.random.SeedSequence, not a "
            f"{type(random_state).__name__} (a generator has no reproducible entropy to "
            "checkpoint)"
        )
    if isinstance(random_state, bool) or not isinstance(random_state, int | np.integer):
        raise ValueError(
            f"random_state must be an int, None or a SeedSequence, got {random_state!r}"
        )
    if random_state < 0:
        raise ValueError(f"random_state must be >= 0, got {random_state}")
    return np.random.SeedSequence(int(random_state))
