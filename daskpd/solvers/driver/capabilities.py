"""What each solver supports, declared on its class: :class:`Capabilities`.

Every registered solver class carries ``capabilities = Capabilities(...)``: its losses and
regularizers (by the names of the built-in ones), whether it takes row weights and a warm
start, and the kinds of data it reads. The plan (:mod:`daskpd.solvers.driver.plan`) checks a run
against them before the solver's own ``check``, so an unsupported choice fails the same way
from :func:`daskpd.solve`, the estimators and the ``daskpd`` command; the estimators and the
command read them instead of keeping their own lists, and the README's solver table is
generated from them (:func:`markdown_table`; ``tests/solvers/test_capabilities.py`` checks that the
table and the declarations agree and that each declaration is true).

A loss or regularizer that is not built in (a user's subclass with its own name) is not
covered by the declarations: the solver's ``check`` decides alone.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "BUILTIN_LOSSES",
    "BUILTIN_REGULARIZERS",
    "Capabilities",
    "is_multiclass",
    "markdown_table",
]

#: Canonical names of the losses of :mod:`daskpd.losses`.
BUILTIN_LOSSES = (
    "hinge",
    "smooth_hinge",
    "squared_hinge",
    "logistic",
    "squared",
    "absolute",
    "epsilon_insensitive",
    "huber",
)
#: Canonical names of the regularizers of :mod:`daskpd.regularizers`.
BUILTIN_REGULARIZERS = (
    "l2",
    "l1",
    "elasticnet",
    "zero",
    "l1_ball",
    "l2_ball",
    "box",
    "group_lasso",
    "l1inf",
    "trace_norm",
)
#: Kinds of data a solver may read: where the rows live and how they are stored.
STORAGES = ("memory", "disk")
LAYOUTS = ("csr", "dense")


@dataclass(frozen=True)
class Capabilities:
    """What a solver supports; a class attribute of every solver.

    Parameters
    ----------
    losses : frozenset of str
        Names of the built-in losses it trains.
    regularizers : frozenset of str
        Names of the built-in regularizers it trains.
    loss_rule : str, default=""
        The rule behind ``losses`` in words ("a smooth loss"), for error messages.
    regularizer_rule : str, default=""
        The rule behind ``regularizers`` in words.
    sample_weight : bool, default=True
        Takes per-row weights stored in the data (``sample_weight``).
    class_weight : bool, default=True
        Takes per-class weights (``class_weight``).
    warm_start : bool, default=True
        Starts from a given model (``warm_start``).
    storage : frozenset of str, default={"memory", "disk"}
        ``"memory"`` (a MemoryDataset, NumPy / scipy input) and ``"disk"`` (a zarr Dataset).
    layouts : frozenset of str, default={"csr", "dense"}
        Row layouts it reads.
    notes : str, default=""
        Conditions the fields cannot say (options some pairs need), for the README table.
    multiclass : bool, default=False
        Trains data of task ``"multiclass"`` with a classification loss, one-vs-rest (the
        solver then has ``run_multiclass(plan, client)``, which the driver calls instead of
        its loop; :mod:`daskpd.solvers.cocoa._multiclass`).
    """

    losses: frozenset
    regularizers: frozenset
    loss_rule: str = ""
    regularizer_rule: str = ""
    sample_weight: bool = True
    class_weight: bool = True
    warm_start: bool = True
    storage: frozenset = frozenset(STORAGES)
    layouts: frozenset = frozenset(LAYOUTS)
    notes: str = ""
    multiclass: bool = False

    def __post_init__(self):
        for field, known in (
            ("losses", BUILTIN_LOSSES),
            ("regularizers", BUILTIN_REGULARIZERS),
            ("storage", STORAGES),
            ("layouts", LAYOUTS),
        ):
            values = frozenset(getattr(self, field))
            unknown = sorted(values - set(known))
            if unknown:
                raise ValueError(f"Capabilities.{field} names unknown entries: {unknown}")
            object.__setattr__(self, field, values)

    @property
    def weighted(self) -> bool:
        """Whether the solver takes row weights of both kinds."""
        return self.sample_weight and self.class_weight

    def refusal(self, solver: str, parameter: str, value) -> ValueError:
        """The error for a loss or regularizer outside the declarations.

        A solver's own check of what its kernels take (a loss or regularizer that is not
        built in, with its own name) raises this, so the supported ones are written once,
        here.

        Parameters
        ----------
        solver : str
        parameter : {"loss", "regularizer"}
        value : str
            The name refused.

        Returns
        -------
        ValueError
        """
        if parameter == "loss":
            rule, supported, order = self.loss_rule, self.losses, BUILTIN_LOSSES
        else:
            rule, supported, order = self.regularizer_rule, self.regularizers, BUILTIN_REGULARIZERS
        return ValueError(_refusal(solver, parameter, str(value), rule, supported, order))

    def check_kernels(self, solver: str, problem, loss_codes, regularizer_codes) -> None:
        """Raise :meth:`refusal` for a loss or regularizer whose code the method's kernels do
        not take (one not built in, that the declarations cannot name), and ValueError for
        ``alpha <= 0``: a method's own check of its kernels, before anything it adds.

        Parameters
        ----------
        solver : str
        problem : daskpd.problem.Problem
        loss_codes, regularizer_codes : collection of int
            The codes (:mod:`daskpd.kernels.scalar`) its kernels take.
        """
        loss, reg = problem.loss, problem.regularizer
        if int(getattr(loss, "code", -1)) not in loss_codes:
            raise self.refusal(solver, "loss", getattr(loss, "name", loss))
        if int(getattr(reg, "code", -1)) not in regularizer_codes:
            raise self.refusal(solver, "regularizer", getattr(reg, "name", reg))
        if not float(problem.alpha) > 0:
            raise ValueError(f"solver {solver!r} needs alpha > 0, got alpha={problem.alpha!r}")

    def check(self, solver: str, problem, data, *, warm_start=False) -> None:
        """Raise ValueError, naming the parameter, for anything outside the declarations.

        Parameters
        ----------
        solver : str
            The solver's name, for the messages.
        problem : daskpd.problem.Problem
        data : Dataset-like
        warm_start : bool, default=False
            Whether the run starts from a given model.
        """
        if is_multiclass(problem, data) and not self.multiclass:
            raise ValueError(
                f"solver {solver!r} does not train multiclass data ({len(data.classes)} "
                "classes); solver 'cocoa' (penalty 'l2') trains it one-vs-rest"
            )
        loss = str(problem.loss.name)
        if loss in BUILTIN_LOSSES and loss not in self.losses:
            raise self.refusal(solver, "loss", loss)
        regularizer = str(problem.regularizer.name)
        if regularizer in BUILTIN_REGULARIZERS and regularizer not in self.regularizers:
            raise self.refusal(solver, "regularizer", regularizer)
        if problem.class_weight is not None and not self.class_weight:
            raise ValueError(
                f"solver {solver!r} does not support class_weight (got "
                f"class_weight={problem.class_weight!r}); use a solver with row weights"
            )
        if getattr(data, "has_sample_weight", False) and not self.sample_weight:
            raise ValueError(
                f"solver {solver!r} does not support sample weights (sample_weight); use a "
                "solver with row weights"
            )
        if warm_start and not self.warm_start:
            raise ValueError(
                f"solver {solver!r} does not support warm_start: it always starts from zero"
            )
        storage = data_storage(data)
        if storage not in self.storage:
            raise ValueError(f"solver {solver!r} does not read data stored {_STORED[storage]}")
        layout = getattr(data, "layout", "csr")
        if layout not in self.layouts:
            raise ValueError(
                f"solver {solver!r} needs {' or '.join(sorted(self.layouts))} data, got "
                f"data with layout={layout!r}"
            )


_STORED = {"memory": "in memory", "disk": "on disk"}


def is_multiclass(problem, data) -> bool:
    """Whether a run is one-vs-rest: a classification loss on data of task "multiclass"."""
    return bool(problem.loss.classification) and getattr(data, "task", None) == "multiclass"


def data_storage(data) -> str:
    """``"disk"`` for a dataset backed by a store path (through any view), else ``"memory"``."""
    path = getattr(data, "path", None) or getattr(getattr(data, "base", None), "path", None)
    return "memory" if path is None else "disk"


def _refusal(solver, parameter, value, rule, supported, order) -> str:
    names = ", ".join(name for name in order if name in supported)
    if rule:
        return f"solver {solver!r} needs {rule}, got {parameter}={value!r} (supported: {names})"
    return f"solver {solver!r} does not support {parameter}={value!r} (supported: {names})"


def markdown_table(solvers) -> str:
    """The README's solver table, one row per ``(name, Capabilities)`` pair.

    Parameters
    ----------
    solvers : iterable of (str, Capabilities)

    Returns
    -------
    str
        A Markdown table (with a trailing newline).
    """

    def yes(flag):
        return "yes" if flag else "no"

    def listed(values, order):
        return ", ".join(name for name in order if name in values)

    lines = [
        "| solver | losses | regularizers | sample / class weights | warm start | data | notes |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, caps in solvers:
        data = ", ".join([listed(caps.storage, STORAGES), listed(caps.layouts, LAYOUTS)])
        lines.append(
            f"| {name} | {listed(caps.losses, BUILTIN_LOSSES)} | "
            f"{listed(caps.regularizers, BUILTIN_REGULARIZERS)} | "
            f"{yes(caps.sample_weight)} / {yes(caps.class_weight)} | {yes(caps.warm_start)} | "
            f"{data} | {caps.notes} |"
        )
    return "\n".join(lines) + "\n"
