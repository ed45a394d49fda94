"""Weighted-degree (WD) string features of DNA windows.

For a window of length L over {A, C, G, T} and a degree K, the WD kernel of Sonnenburg et al.
(BMC Bioinformatics 8(S10):S7, 2007) is

    k(x, x') = sum_{k=1..K} beta_k sum_{l=1..L-k+1} 1[u_{k,l}(x) = u_{k,l}(x')],
    beta_k = 2 (K - k + 1) / (K (K + 1)),

with ``u_{k,l}(x)`` the k-mer of ``x`` starting at position ``l``. Its explicit feature map has
one indicator per (order k, position l, k-mer value) with value ``sqrt(beta_k)``; the row is
divided by its norm so that ``||x|| = 1``.

Explicit column layout (as shogun's ``WDFeatures`` but without the impossible positions):
order k occupies ``(L - k + 1) * 4**k`` columns starting at ``offsets[k - 1]``, and the k-mer
``c`` (base-4 digits A=0, C=1, G=2, T=3, first letter most significant) at 0-based position
``l`` is column ``offsets[k - 1] + l * 4**k + c``. Columns are therefore increasing within a
row.

Hashed layout (``hash_bits = b > 0``): the key ``(l << 45) | (k << 40) | c`` (``k <= 20``,
``l < 2**19``) goes through the splitmix64 finalizer and the top ``b`` bits give the column.
Colliding features of a row add up (binary features stay 1).

K-mers containing an unknown nucleotide (code 4, ``N``) are left out, and the normalization
uses the features actually present.
"""

from __future__ import annotations

import numpy as np

from daskpd.kernels._config import njit

#: Largest degree of the hashed layout (the key holds the order in 5 bits, the k-mer in 40).
MAX_HASHED_DEGREE = 20
#: Largest window length of the hashed layout (the key holds the position in 19 bits).
MAX_HASHED_LENGTH = 2**19


def wd_weights(degree: int) -> np.ndarray:
    """Return ``beta_k = 2 (K - k + 1) / (K (K + 1))`` for ``k = 1..K``."""
    k = np.arange(1, degree + 1, dtype=np.float64)
    return 2.0 * (degree - k + 1) / (degree * (degree + 1))


def wd_offsets(length: int, degree: int) -> np.ndarray:
    """First column of each order in the explicit layout; the last entry is the width."""
    offsets = np.zeros(degree + 1, dtype=np.int64)
    for k in range(1, degree + 1):
        offsets[k] = offsets[k - 1] + max(length - k + 1, 0) * 4**k
    return offsets


def wd_n_features(length: int, degree: int, hash_bits: int = 0) -> int:
    """Number of columns of the WD map of windows of ``length`` and degree ``degree``."""
    if hash_bits:
        return 2**hash_bits
    return int(wd_offsets(length, degree)[-1])


@njit
def splitmix64(key):
    """The splitmix64 finalizer of a uint64 (wrapping arithmetic)."""
    z = key + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit
def wd_features(codes, degree, offsets, sqrt_weights, hash_bits, binary):
    """Weighted-degree features of encoded windows, as CSR.

    Parameters
    ----------
    codes : ndarray of uint8 of shape (n_samples, length)
        Letters encoded 0..3 (A, C, G, T) and 4 (N).
    degree : int
    offsets : ndarray of int64 of shape (degree + 1,)
        From :func:`wd_offsets` (unused when hashing).
    sqrt_weights : ndarray of float64 of shape (degree,)
        ``sqrt(beta_k)``.
    hash_bits : int
        0 for the explicit layout, else the number of bits of the hashed layout.
    binary : bool
        Indicators of value 1 instead of normalized weights.

    Returns
    -------
    indptr : ndarray of int64 of shape (n_samples + 1,)
    indices : ndarray of int32
    data : ndarray of float64
        Sorted, unique column ids per row.
    """
    n, length = codes.shape
    per_row = 0
    for k in range(1, degree + 1):
        if length - k + 1 > 0:
            per_row += length - k + 1
    indptr = np.zeros(n + 1, dtype=np.int64)
    indices = np.empty(n * per_row, dtype=np.int32)
    data = np.empty(n * per_row, dtype=np.float64)
    row_cols = np.empty(per_row, dtype=np.int64)
    row_vals = np.empty(per_row, dtype=np.float64)
    shift = np.uint64(64 - hash_bits) if hash_bits > 0 else np.uint64(0)
    nnz = 0
    for i in range(n):
        count = 0
        norm_sq = 0.0
        for k in range(1, degree + 1):
            if length - k + 1 <= 0:
                break
            mask = (np.int64(1) << (2 * k)) - 1
            code = np.int64(0)
            unknown = 0  # N letters inside the current window
            for p in range(length):
                letter = codes[i, p]
                if letter == 4:
                    unknown += 1
                    letter = 0
                code = ((code << 2) | np.int64(letter)) & mask
                if p >= k and codes[i, p - k] == 4:
                    unknown -= 1
                if p < k - 1:
                    continue
                if unknown > 0:
                    continue
                l = p - k + 1
                if hash_bits > 0:
                    key = (np.uint64(l) << np.uint64(45)) | (np.uint64(k) << np.uint64(40))
                    key = key | np.uint64(code)
                    row_cols[count] = np.int64(splitmix64(key) >> shift)
                else:
                    row_cols[count] = offsets[k - 1] + np.int64(l) * (mask + 1) + code
                row_vals[count] = sqrt_weights[k - 1]
                norm_sq += sqrt_weights[k - 1] * sqrt_weights[k - 1]
                count += 1
        scale = 1.0
        if not binary and norm_sq > 0.0:
            scale = 1.0 / np.sqrt(norm_sq)
        if hash_bits > 0:
            order = np.argsort(row_cols[:count], kind="mergesort")
            previous = -1
            for t in range(count):
                column = row_cols[order[t]]
                value = 1.0 if binary else row_vals[order[t]] * scale
                if column == previous:
                    if not binary:
                        data[nnz - 1] += value
                    continue
                indices[nnz] = column
                data[nnz] = value
                nnz += 1
                previous = column
        else:
            for t in range(count):
                indices[nnz] = row_cols[t]
                data[nnz] = 1.0 if binary else row_vals[t] * scale
                nnz += 1
        indptr[i + 1] = nnz
    return indptr, indices[:nnz], data[:nnz]


@njit
def canonical_rows(indptr, indices):
    """Sort the column ids of each row and drop repeats, in place.

    Used by the generators, which draw column ids with replacement.

    Parameters
    ----------
    indptr : ndarray of int64 of shape (n_rows + 1,)
    indices : ndarray of int64

    Returns
    -------
    new_indptr : ndarray of int64
    new_indices : ndarray of int32
        Strictly increasing within each row.
    """
    n = indptr.shape[0] - 1
    new_indptr = np.zeros(n + 1, dtype=np.int64)
    out = np.empty(indices.shape[0], dtype=np.int32)
    nnz = 0
    for i in range(n):
        row = np.sort(indices[indptr[i] : indptr[i + 1]])
        previous = -1
        for t in range(row.shape[0]):
            if row[t] != previous:
                out[nnz] = row[t]
                nnz += 1
                previous = row[t]
        new_indptr[i + 1] = nnz
    return new_indptr, out[:nnz]
