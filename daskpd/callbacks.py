"""Per-epoch callbacks of :func:`daskpd.solve`: progress bars, early stopping, recording.

A callback is either a plain callable ``f(info) -> bool | None`` or a :class:`Callback`
object. After every epoch the driver calls ``on_epoch_end(info)`` with an
:class:`daskpd.solvers.driver.EpochInfo`; a true return value stops training after that
epoch (``stop_reason="callback"``). A solver whose start comes certified (DSO from the dual
solver's rounds) also reports its start, as epoch 0. ``on_train_begin(run)`` receives a
dict (``solver``, ``epoch`` already done, e.g. after a resume, ``max_epochs``, ``history``)
and ``on_train_end()`` is called once however the run ends (also on errors), so a progress
bar always closes.
"""

from __future__ import annotations

import math
import sys

# tqdm (0.2 s, 138 modules, measured here) only for a progress bar.

__all__ = ["Callback", "EarlyStopping", "HistoryRecorder", "ProgressBar", "as_callbacks"]


class Callback:
    """Base class: override the hooks you need (each does nothing by default)."""

    def on_train_begin(self, run: dict) -> None:
        """Called once before the first epoch.

        Parameters
        ----------
        run : dict
            ``solver``, ``epoch`` (epochs already done), ``max_epochs``, ``history``.
        """

    def on_epoch_end(self, info) -> bool | None:
        """Called after each epoch; return True to stop training.

        Parameters
        ----------
        info : EpochInfo
            Epoch number, training and wall seconds, this epoch's history row (or None),
            iterate.

        Returns
        -------
        stop : bool or None
        """
        return None

    def on_train_end(self) -> None:
        """Called once when the run ends, normally or by an exception."""


class _FunctionCallback(Callback):
    def __init__(self, function):
        self.function = function

    def on_epoch_end(self, info):
        return self.function(info)

    def __repr__(self):
        return f"_FunctionCallback({self.function!r})"


def as_callbacks(callbacks) -> list:
    """Normalize ``callbacks`` into a list of :class:`Callback` objects.

    Parameters
    ----------
    callbacks : None, a callable, a Callback, or a sequence of them

    Returns
    -------
    list of Callback

    Raises
    ------
    ValueError
        When an element is neither callable nor a Callback.
    """
    if callbacks is None:
        return []
    if isinstance(callbacks, Callback) or callable(callbacks):
        callbacks = [callbacks]
    out = []
    for callback in callbacks:
        if isinstance(callback, Callback):
            out.append(callback)
        elif hasattr(callback, "on_epoch_end"):
            # Duck-typed callback objects: fill in the hooks they do not define.
            out.append(_DuckCallback(callback))
        elif callable(callback):
            out.append(_FunctionCallback(callback))
        else:
            raise ValueError(f"callbacks must be callables or Callback objects, got {callback!r}")
    return out


class _DuckCallback(Callback):
    def __init__(self, inner):
        self.inner = inner

    def on_train_begin(self, run):
        if hasattr(self.inner, "on_train_begin"):
            self.inner.on_train_begin(run)

    def on_epoch_end(self, info):
        return self.inner.on_epoch_end(info)

    def on_train_end(self):
        if hasattr(self.inner, "on_train_end"):
            self.inner.on_train_end()


def _format(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.4g}"


class ProgressBar(Callback):
    """A tqdm progress bar over epochs: primal objective, gap, test AUPRC, and two clocks.

    The clocks are ``wall`` (wall time so far, evaluation included) and ``train`` (the
    solver's initialization and epochs), updated every epoch; the other values change at
    evaluations.

    Parameters
    ----------
    file : file-like, optional
        Where the bar is drawn; default ``sys.stderr``.
    disable : bool, default=False
        Draw nothing (keeps call sites simple when verbosity is a flag).
    description : str, optional
        Text before the bar; default the solver's name.
    """

    def __init__(self, *, file=None, disable=False, description=None):
        self.file = file
        self.disable = disable
        self.description = description
        self.bar = None
        self.postfix: dict = {}
        self.row = None
        self.clocks = None

    def on_train_begin(self, run):
        from tqdm.auto import tqdm

        self.bar = tqdm(
            total=run["max_epochs"],
            initial=run["epoch"],
            desc=self.description or run["solver"],
            unit="epoch",
            file=self.file if self.file is not None else sys.stderr,
            disable=self.disable,
            dynamic_ncols=True,
        )
        self.row, self.clocks = None, None
        if run["history"]:
            self.row = run["history"][-1]
            if "wall_seconds" in self.row:
                self.clocks = (self.row["wall_seconds"], self.row["seconds"])
            self._show()

    def _show(self) -> None:
        self.postfix = {}
        if self.row is not None:
            row = self.row
            self.postfix = {"primal": _format(row.get("primal")), "gap": _format(row.get("gap"))}
            if "test_auprc" in row:
                self.postfix["test_auprc"] = _format(row["test_auprc"])
            elif "test_rmse" in row:
                self.postfix["test_rmse"] = _format(row["test_rmse"])
        if self.clocks is not None:
            wall, train = self.clocks
            self.postfix.update(wall=f"{wall:.1f}s", train=f"{train:.1f}s")
        self.bar.set_postfix(self.postfix, refresh=False)

    def on_epoch_end(self, info):
        if self.bar is None:
            return None
        if info.row is not None:
            # A certificate-only row has no test metrics: keep showing the last ones.
            scores = {k: v for k, v in (self.row or {}).items() if k.startswith("test_")}
            self.row = {**scores, **info.row}
        self.clocks = (info.wall_seconds, info.seconds)
        self._show()
        # After a replay (lost worker) the epoch can go back: set the position, not += 1.
        self.bar.n = info.epoch
        self.bar.refresh()
        return None

    def on_train_end(self):
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class EarlyStopping(Callback):
    """Stop when a history value has not improved for ``patience`` evaluations.

    Parameters
    ----------
    metric : str, default="test_auprc"
        Key of the history row to watch.
    mode : {"max", "min"}, default="max"
        Whether larger or smaller values are better.
    patience : int, default=3
        Evaluations without improvement before stopping.
    min_delta : float, default=0.0
        Smallest change that counts as an improvement.
    """

    def __init__(self, metric="test_auprc", *, mode="max", patience=3, min_delta=0.0):
        if mode not in ("max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', got {mode!r}")
        if int(patience) < 1:
            raise ValueError(f"patience must be >= 1, got {patience!r}")
        self.metric, self.mode = metric, mode
        self.patience, self.min_delta = int(patience), float(min_delta)
        self.best = None
        self.bad = 0

    def on_train_begin(self, run):
        self.best, self.bad = None, 0

    def on_epoch_end(self, info):
        if info.row is None or self.metric not in info.row:
            return None
        value = info.row[self.metric]
        if isinstance(value, float) and math.isnan(value):
            return None
        sign = 1.0 if self.mode == "max" else -1.0
        if self.best is None or sign * (value - self.best) > self.min_delta:
            self.best, self.bad = value, 0
            return None
        self.bad += 1
        return self.bad >= self.patience


class HistoryRecorder(Callback):
    """Keep every :class:`EpochInfo` seen (handy in notebooks and tests).

    Attributes
    ----------
    infos : list of EpochInfo
    """

    def __init__(self):
        self.infos: list = []

    def on_epoch_end(self, info):
        self.infos.append(info)
        return None
