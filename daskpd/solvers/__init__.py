"""Primal-dual solvers over Dask blocks: one module per method plus the shared driver."""
