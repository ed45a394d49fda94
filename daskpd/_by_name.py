"""What losses and regularizers share: the lookup of one by name, and the default of the
parameters they reach kernels with."""

from __future__ import annotations

import numpy as np


class KernelObject:
    """A math object as kernels receive it: an integer ``code`` and a float64 ``params``
    array (the base of :class:`~daskpd.losses.Loss` and
    :class:`~daskpd.regularizers.Regularizer`)."""

    @property
    def params(self) -> np.ndarray:
        """Parameters as the float64 array kernels receive (length >= 1)."""
        return np.zeros(1)


def resolve_by_name(name_or_obj, base, table, what, instances):
    """Pass an instance of ``base`` through, or build the one a name stands for.

    Names are case-insensitive, and ``-`` or spaces may replace ``_``; a named object gets
    its default parameters.

    Parameters
    ----------
    name_or_obj : str or object
    base : type
        The class whose instances pass through (``Loss``, ``Regularizer``).
    table : dict of str to type
        Each accepted name and the class it builds.
    what : str
        The argument's name, for messages (``"loss"``, ``"regularizer"``).
    instances : str
        What else the unknown-name message offers (e.g. ``"a Loss instance"``).

    Raises
    ------
    ValueError
        If the name is unknown or the argument is neither a string nor an instance.
    """
    if isinstance(name_or_obj, base):
        return name_or_obj
    if isinstance(name_or_obj, str):
        key = name_or_obj.strip().lower().replace("-", "_").replace(" ", "_")
        if key in table:
            return table[key]()
        raise ValueError(
            f"unknown {what}={name_or_obj!r}; expected one of {sorted(table)} or {instances}"
        )
    raise ValueError(
        f"{what} must be a name or a {base.__name__} instance, got {what}={name_or_obj!r}"
    )
