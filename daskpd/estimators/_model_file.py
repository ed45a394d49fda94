"""``save`` and ``load`` of every estimator: :func:`daskpd.model_file.save_model` and
:func:`daskpd.model_file.load_model`, typed.

The model file of an estimator, what it holds and the checks of loading it are in
:mod:`daskpd.model_file`; this module gives the estimators their methods and enters the
public classes in the table model files name them by (:func:`_model_class`).
"""

from __future__ import annotations

import os

from daskpd.model_file import load_estimator, load_model, model_class, save_model

__all__ = ["load_estimator"]

#: Class decorator: let model files name the class (as ``daskpd.estimators.<name>``).
_model_class = model_class("estimator")


class _ModelFileMixin:
    """``save`` and ``load`` of every estimator (mixed into ``_SaddlePointBase``)."""

    # ---------------------------------------------------------------- storage

    def save(self, path, *, overwrite=False):
        """Write the fitted model as a model file at ``path`` (atomically).

        A model file of kind ``"estimator"`` (:mod:`daskpd.model_file`): ``coef_`` and
        every other array (``classes_``, a random state's key) are zarr arrays with
        checksums; parameters and fitted attributes are a JSON document
        (:mod:`daskpd.model_file._codec`), so loading the file never runs code from it. The
        file says what the model is, never where or how to run: ``callback`` and ``cluster``
        are stored as None, and ``solver_options`` without the run settings that ``fit``
        passes on with them (``checkpoint_dir``, ``resume``, ...). Parameters, result and
        errors: :func:`daskpd.save_model`.
        """
        return save_model(self, path, overwrite=overwrite)

    @classmethod
    def load(cls, path):
        """Read a model written by :meth:`save`.

        Parameters
        ----------
        path : str or os.PathLike
            A model file of kind ``"estimator"``.

        Returns
        -------
        estimator : object
            The fitted estimator (of the class that saved it).

        Raises
        ------
        TypeError
            When the file holds another estimator class.
        ValueError
            When the file is not an estimator's (a solve result's file included), or fails
            a check of :func:`daskpd.model_file.read_model_file`.
        """
        estimator = load_model(path, kind="estimator")
        if not isinstance(estimator, cls):
            raise TypeError(
                f"{os.fspath(path)} holds a {type(estimator).__name__}, not a {cls.__name__}"
            )
        return estimator
