"""A peer's from-files process: load the ``.npz`` training set, fit, write the weights.

Run as a script by :func:`daskpd.bench.files.time_peer` with one JSON argument: ``function``
(a fit function of ``peers.py``), ``npz``, ``alpha``, ``kwargs`` and ``out``. It loads
``peers.py`` by its path, not the ``daskpd`` package, so the process pays for the peer's
imports and not for daskpd's.
"""

import importlib.util
import json
import os
import sys

import numpy as np
import scipy.sparse as sp


def main(spec):
    here = os.path.dirname(os.path.abspath(__file__))
    module_spec = importlib.util.spec_from_file_location(
        "_bench_peers", os.path.join(here, "peers.py")
    )
    peers = importlib.util.module_from_spec(module_spec)
    sys.modules[module_spec.name] = peers  # its dataclass looks its module up
    module_spec.loader.exec_module(peers)
    with np.load(spec["npz"]) as arrays:
        X = sp.csr_matrix(
            (arrays["data"], arrays["indices"], arrays["indptr"]), shape=tuple(arrays["shape"])
        )
        y = arrays["y"]
    kwargs = dict(spec["kwargs"])
    if spec["function"] == "fit_snapml":
        kwargs["isolate"] = False  # this process does nothing after the fit
    fit = getattr(peers, spec["function"])(X, y, spec["alpha"], **kwargs)
    np.save(spec["out"], fit.coef)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
