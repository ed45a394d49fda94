"""DNA sequences: WD features against a slow reference, CSV/FASTA ingestion, bad input."""

from __future__ import annotations

import glob
import gzip
import math

import numpy as np
import pytest
import scipy.sparse as sp

from daskpd.cli import main as cli_main
from daskpd.io.sequences import (
    SequenceFormatError,
    WDOptions,
    encode,
    ingest_sequences,
    wd_transform,
)
from daskpd.kernels.features import wd_offsets, wd_weights

DATA = "data/statlog_dna.csv"
_MASK64 = 2**64 - 1


def _splitmix64(key):
    z = (key + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def _reference_wd(sequences, degree, hash_bits=0, binary=False):
    """Slow pure-Python WD map, written from the definition in the module docstring."""
    length = len(sequences[0])
    beta = [2.0 * (degree - k + 1) / (degree * (degree + 1)) for k in range(1, degree + 1)]
    offsets = [0]
    for k in range(1, degree + 1):
        offsets.append(offsets[-1] + (length - k + 1) * 4**k)
    n_features = 2**hash_bits if hash_bits else offsets[-1]
    rows = []
    for sequence in sequences:
        entries = {}
        total = 0.0
        for k in range(1, degree + 1):
            for l in range(length - k + 1):
                kmer = sequence[l : l + k].upper()
                if "N" in kmer:
                    continue
                code = 0
                for letter in kmer:
                    code = code * 4 + "ACGT".index(letter)
                if hash_bits:
                    column = _splitmix64((l << 45) | (k << 40) | code) >> (64 - hash_bits)
                else:
                    column = offsets[k - 1] + l * 4**k + code
                entries.setdefault(column, []).append(math.sqrt(beta[k - 1]))
                total += beta[k - 1]
        scale = 1.0 if binary else 1.0 / math.sqrt(total)
        rows.append({c: (1.0 if binary else sum(v) * scale) for c, v in sorted(entries.items())})
    dense = np.zeros((len(sequences), n_features))
    for i, row in enumerate(rows):
        for column, value in row.items():
            dense[i, column] = value
    return dense


def _random_sequences(rng, n, length, letters="ACGT"):
    return ["".join(rng.choice(list(letters), size=length)) for _ in range(n)]


@pytest.mark.parametrize(
    "degree,hash_bits,binary,letters",
    [(1, 0, False, "ACGT"), (3, 0, False, "ACGT"), (4, 0, True, "ACGT"), (3, 0, False, "ACGTN"),
     (5, 6, False, "ACGT"), (4, 5, True, "ACGTN"), (6, 12, False, "acgtACGT")],
)  # fmt: skip
def test_wd_features_match_reference(rng, degree, hash_bits, binary, letters):
    sequences = _random_sequences(rng, 12, 11, letters)
    options = WDOptions(degree=degree, hash_bits=hash_bits, binary=binary)
    X = wd_transform(encode(sequences, allow_n="N" in letters), options)
    expected = _reference_wd(sequences, degree, hash_bits, binary)
    assert X.shape == expected.shape
    assert X.has_sorted_indices and np.all(np.diff(X.indices)[np.diff(X.indices) != 0] != 0)
    np.testing.assert_allclose(X.toarray(), expected, rtol=1e-13, atol=0)
    if not binary and "N" not in letters and not hash_bits:
        np.testing.assert_allclose(sp.linalg.norm(X, axis=1), 1.0, rtol=1e-13)


def test_explicit_map_reproduces_the_wd_kernel(rng):
    degree, length = 4, 9
    sequences = _random_sequences(rng, 7, length)
    X = wd_transform(encode(sequences), WDOptions(degree=degree))
    beta = wd_weights(degree)
    norm_sq = sum((length - k + 1) * beta[k - 1] for k in range(1, degree + 1))
    for a in range(len(sequences)):
        for b in range(len(sequences)):
            kernel = sum(
                beta[k - 1]
                for k in range(1, degree + 1)
                for l in range(length - k + 1)
                if sequences[a][l : l + k] == sequences[b][l : l + k]
            )
            assert (X[a] @ X[b].T).toarray()[0, 0] == pytest.approx(kernel / norm_sq, rel=1e-12)
    assert X.shape[1] == wd_offsets(length, degree)[-1]


def _csv_text(sequences, labels, header="sequence,class"):
    lines = [f"{s},{y}" for s, y in zip(sequences, labels, strict=True)]
    return (header + "\n" + "\n".join(lines)).encode()


def test_csv_ingestion_equals_transform_of_the_data_file(tmp_path):
    import csv

    with open(DATA) as handle:
        rows = list(csv.DictReader(handle))[:400]
    sequences = [row["sequence"] for row in rows]
    y = np.where([row["class"] == "ie" for row in rows], 1.0, -1.0)
    source = tmp_path / "dna.csv"
    source.write_bytes(_csv_text(sequences, [row["class"] for row in rows]))
    options = WDOptions(degree=3)
    expected = wd_transform(encode(sequences), options)
    dataset = ingest_sequences(
        source, tmp_path / "out", degree=3, label_column="class", positive="ie",
        dtype=np.float64, chunk_bytes=3000, range_bytes=5000,
    )  # fmt: skip
    X, labels = dataset.read_rows(0, dataset.n_samples)
    assert dataset.task == "binary"
    np.testing.assert_array_equal(labels, y)
    assert (X != expected).nnz == 0


def test_fasta_and_compressed_csv_equal_plain_csv(tmp_path, rng):
    sequences = _random_sequences(rng, 60, 20)
    labels = rng.choice([-1, 1], 60)
    csv_path = tmp_path / "s.csv"
    lines = [f"r{i},{s},{y}" for i, (s, y) in enumerate(zip(sequences, labels, strict=True))]
    csv_path.write_text("id,sequence,label\n" + "\n".join(lines) + "\n")
    fasta = tmp_path / "s.fa"
    records = []
    for i, (s, y) in enumerate(zip(sequences, labels, strict=True)):
        header = f">r{i} some words label={y}" if i % 2 else f">r{i} {y}"
        records.append(f"{header}\n{s[:7]}\n{s[7:]}\n")  # wrapped sequence lines
    fasta.write_text("".join(records))
    packed = tmp_path / "s.csv.gz"
    with gzip.open(packed, "wb") as handle:
        handle.write(csv_path.read_bytes())
    results = []
    for name, source, kwargs in [
        ("csv", csv_path, {"range_bytes": 300, "chunk_bytes": 200}),
        ("fasta", fasta, {"chunk_bytes": 100}),
        ("gz", packed, {}),
    ]:
        dataset = ingest_sequences(source, tmp_path / name, degree=4, hash_bits=9, **kwargs)
        results.append(dataset.read_rows(0, dataset.n_samples))
    for X, y in results[1:]:
        assert (X != results[0][0]).nnz == 0
        np.testing.assert_array_equal(y, results[0][1])
    np.testing.assert_array_equal(results[0][1], labels.astype(float))


def test_n_allowed_only_when_asked(tmp_path):
    source = tmp_path / "n.csv"
    source.write_bytes(_csv_text(["ACGTN", "ACGTA"], [1, -1], header="sequence,label"))
    dataset = ingest_sequences(source, tmp_path / "ok", degree=2, allow_n=True)
    X, _ = dataset.read_rows(0, 2)
    assert X[0].nnz == (5 + 4) - 2  # the 1-mer N and the 2-mer TN are left out
    with pytest.raises(SequenceFormatError, match=r"n\.csv:2: letter 'N' at position 5"):
        ingest_sequences(source, tmp_path / "bad", degree=2)
    assert glob.glob(f"{tmp_path / 'bad'}*") == []


BAD_SEQUENCES = [
    # (file name, content, expected message part, options)
    ("x.csv", b"sequence,label\nACGT,1\nACXT,1\n", "x.csv:3: letter 'X' at position 3", {}),
    ("l.csv", b"sequence,label\nACGT,1\nACG,1\n", "l.csv:3: sequence has length 3", {}),
    ("f.csv", b"sequence,label\nACGT,1\nACGT,1,9\n", "f.csv:3: expected 2 fields", {}),
    ("y.csv", b"sequence,label\nACGT,1\nACGT,ie\n", "y.csv:3: label 'ie' is not a number", {}),
    ("t.csv", b"sequence,label\nACGT,1\nACGT,2\n", "t.csv:3: label 2 does not fit",
     {"task": "binary"}),
    ("h.csv", b"seq,label\nACGT,1\n", "h.csv:1: no column 'sequence'", {}),
    ("e.csv", b"sequence,label\n", "e.csv: no sequence found", {}),
    ("p.fa", b"ACGT\n>r1 1\nACGT\n", "p.fa:1: sequence text before the first", {}),
    ("q.fa", b">r1 1\nACGT\n>r2 1\nAC-T\n", "q.fa:3: record 'r2': letter '-' at position 3", {}),
]  # fmt: skip


@pytest.mark.parametrize("name,content,expected,options", BAD_SEQUENCES)
def test_bad_sequences_name_the_place(tmp_path, name, content, expected, options):
    source = tmp_path / name
    source.write_bytes(content)
    dest = tmp_path / "out"
    with pytest.raises(SequenceFormatError) as info:
        ingest_sequences(source, dest, degree=2, **options)
    assert f"{tmp_path}/{expected}" in str(info.value)
    assert glob.glob(f"{dest}*") == []


def test_cli_sequences(tmp_path, capsys):
    dest = tmp_path / "dna"
    code = cli_main(
        ["ingest", DATA, str(dest), "--format", "sequences", "--degree", "3", "--hash-bits",
         "10", "--label-column", "class", "--positive", "ie"]
    )  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out
    assert '"1": 765' in out.replace("\n", "").replace("  ", "")
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"sequence,label\nACGT,1\nACGU,1\n")
    assert cli_main(["ingest", str(bad), str(tmp_path / "o"), "--degree", "2"]) == 2
    err = capsys.readouterr().err
    assert "bad.csv:3: letter 'U'" in err and err.count("\n") == 1
    assert glob.glob(f"{tmp_path / 'o'}*") == []
