"""The protocol a method implements: the :class:`Solver` base class and its hooks' defaults.

Re-exported by :mod:`daskpd.solvers.driver.types`, where methods import it from.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = ["Solver"]


class Solver:
    """What a method implements to run under :func:`~daskpd.solvers.driver.run.solve`.

    A method subclasses this class, sets ``name``, ``Options`` (a frozen dataclass) and
    ``capabilities``, implements the six methods that raise ``NotImplementedError`` here, and
    overrides the optional hooks whose defaults do not fit. :func:`register_solver` makes a
    class written without this base (a test's solver) a subclass of it, so the driver calls
    every hook directly.

    The solver never prints, never evaluates the objective for the driver's sake, and never
    calls ``compute`` inside an inner loop.

    Attributes
    ----------
    name : str
        The registered name.
    Options : type
        Frozen dataclass of the method's options (:func:`make_options` builds it).
    capabilities : Capabilities or None
        What the method supports, checked by the plan before :meth:`check`, read by the
        estimators, the command and the README's table; None leaves everything to
        :meth:`check`.
    has_certificate : bool
        Whether :meth:`certificate` can certify an epoch's iterate.
    certificate_reads_data : bool
        Whether that certificate is a pass over the rows (SPDC's, with ``X^T z`` kept on the
        workers): the driver then asks for it at the epochs the cadence evaluates, in place
        of the evaluation (except the run's last and with test data), and a certificate
        within ``tol`` becomes the run's last row with the iterate gathered. Otherwise (the
        epoch's own sums, CoCoA+'s) it is asked for after every epoch the cadence skips, so
        that a run stops by ``tol`` at the first certified epoch.
    """

    name: ClassVar[str] = ""
    Options: ClassVar[type]
    capabilities: ClassVar[Any] = None
    has_certificate: ClassVar[bool] = False
    certificate_reads_data: ClassVar[bool] = False

    # -- required ---------------------------------------------------------------------------
    def check(self, problem, data, options) -> None:
        """Raise ``ValueError`` (naming the parameter and its value) for anything the method
        cannot do with this problem and data, before any Dask work."""
        raise NotImplementedError

    def init(self, problem, data, *, seed, client, options, warm_start=None):
        """Return the state of epoch 0.

        Parameters
        ----------
        problem : daskpd.problem.Problem
        data : Dataset or MemoryDataset
        seed : numpy.random.SeedSequence
            The root seed of the run: keep it in the state and draw the randomness of epoch
            ``e`` from ``epoch_seed(seed, e)`` (per block from
            ``block_seeds(epoch_seed(seed, e), n)``), so that a run is a function of (seed,
            epoch) only and resumes bit for bit.
        client : distributed.Client or None
            None: in-process (plain ``dask.compute``).
        options : the method's ``Options``
        warm_start : Iterate, optional
            ``z`` an ndarray or None.

        Returns
        -------
        state
        """
        raise NotImplementedError

    def run_epoch(self, state, epoch):
        """Return the state after epoch ``epoch`` (1, 2, ...): ONE Dask compute or one wave
        of futures.

        Tasks are pure: they copy what they mutate, so a retried task gives the same bits.
        The one exception is a block that a single task reads, updated in place only after
        everything in the task that can fail (DSO's ``w`` blocks); the state given to such a
        ``run_epoch`` is spent, and the driver uses only the state it returns.

        Parameters
        ----------
        state
            From :meth:`init`, :meth:`run_epoch` or :meth:`restore`.
        epoch : int
            1, 2, ...

        Returns
        -------
        state
        """
        raise NotImplementedError

    def iterate(self, state):
        """The current answer: ``w`` (and ``w_avg``) as ndarrays; ``z`` an ndarray, a list of
        per-range arrays or futures with ``z_bounds``, or None (the evaluation then builds
        the dual point from ``w``).

        Parameters
        ----------
        state

        Returns
        -------
        Iterate
        """
        raise NotImplementedError

    def state_arrays(self, state) -> dict:
        """Everything needed to resume exactly (``w``, ``z``, accumulators, counters as 0-d
        arrays), written to the checkpoint as zarr arrays.

        Parameters
        ----------
        state

        Returns
        -------
        dict of str to ndarray
        """
        raise NotImplementedError

    def restore(self, problem, data, arrays, *, seed, client, options):
        """The state after the checkpointed epoch, from :meth:`state_arrays`'s arrays
        (``seed``: the root seed :meth:`init` received)."""
        raise NotImplementedError

    # -- optional hooks, with the defaults the driver relies on ------------------------------
    def prepare(self, data, options, client) -> None:
        """Called once the client is known, before :meth:`init`: what depends on the client
        and is done once a run (DSO lays out in-memory data for the grid it will use)."""

    def stop_at_gap(self, state, tol):
        """The state of a run that stops once ``tol`` is certified (CoCoA+: a round whose
        certifying pass shows the gap within ``tol`` skips its later passes)."""
        return state

    def certificate(self, state):
        """``(primal, dual)`` of the point :meth:`iterate` would return, when the epoch's
        work produced them (see ``has_certificate``, ``certificate_reads_data``), else
        None."""
        return None

    def start_certificate(self, state):
        """``(primal, dual)`` of the epoch-0 iterate when :meth:`init` produced them (DSO's
        start from the dual solver's rounds): reported as an epoch-0 row; ``tol`` is checked
        from epoch 1 on. None otherwise."""
        return None

    def settle(self, state) -> None:
        """Wait for the tasks an epoch leaves running after it ends (CoCoA+'s shrunk passes),
        so that the run leaves the workers idle."""

    def close(self, state) -> None:
        """Release what the run holds outside Dask (shared-memory files). Called once when
        the run ends, and on a state given up for a replay after a lost worker."""

    def run_multiclass(self, plan, client):
        """The whole run of a plan on multiclass data, one-vs-rest, in place of the loop; only
        a method whose ``capabilities`` declare ``multiclass`` is asked (CoCoA+)."""
        raise NotImplementedError(f"solver {self.name!r} does not train multiclass data")
