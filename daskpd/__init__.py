"""daskpd: out-of-core primal-dual training of regularized linear models on Dask."""

__version__ = "0.1.0"

__all__ = ["__version__"]
