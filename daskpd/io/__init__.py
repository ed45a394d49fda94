"""Ingestion of external formats (svmlight / libsvm text, DNA sequences) into the zarr format."""
