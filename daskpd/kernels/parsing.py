"""Numba parsers over byte buffers: svmlight / libsvm text and delimited sequence files.

The svmlight kernel follows the grammar that :func:`sklearn.datasets.load_svmlight_file` reads,
so that ingestion reproduces it exactly:

* lines are separated by ``\\n``; everything from ``#`` to the end of a line is a comment;
  tokens are separated by ASCII whitespace (space, ``\\t``, ``\\r``, ``\\v``, ``\\f``);
* a line without tokens is skipped; otherwise its first token is the label, and the others are
  ``index:value`` pairs with strictly increasing indices; an optional ``qid:N`` token may follow
  the label.

Numbers are parsed to float64 with correct rounding. The kernel handles the common case
itself (at most 18 significant digits and a mantissa and power of ten that are exact in
float64, Clinger's fast path) and records the byte span of any other token; the caller converts
those with NumPy's correctly rounded bytes-to-float cast (:func:`resolve_slow_numbers`), which is
the same conversion Python's ``float`` performs. Malformed input stops the kernel with an error
code, the buffer position of the offending token and the 0-based line number within the buffer.
"""

from __future__ import annotations

import numpy as np

from daskpd.kernels._config import njit

# Error codes returned by :func:`parse_svmlight`. ``ERROR_MESSAGES`` describes each one.
OK = 0
ERR_UNPARSABLE_TOKEN = 1
ERR_NON_NUMERIC_VALUE = 2
ERR_BAD_INDEX = 3
ERR_UNSORTED_INDEX = 4
ERR_NAN_INF_VALUE = 5
ERR_MISSING_LABEL = 6
ERR_NON_NUMERIC_LABEL = 7
ERR_QID = 8
ERR_INDEX_TOO_LARGE = 9
ERR_MULTILABEL = 10
ERR_NAN_INF_LABEL = 11

ERROR_MESSAGES = {
    ERR_UNPARSABLE_TOKEN: "unparsable token (expected index:value)",
    ERR_NON_NUMERIC_VALUE: "non-numeric feature value",
    ERR_BAD_INDEX: "invalid feature index (zero or negative in a one-based file, or negative)",
    ERR_UNSORTED_INDEX: "feature indices are not sorted and unique",
    ERR_NAN_INF_VALUE: "NaN or infinite feature value",
    ERR_MISSING_LABEL: "missing label (line starts with index:value)",
    ERR_NON_NUMERIC_LABEL: "non-numeric label",
    ERR_QID: "qid token (pass qid='ignore' / --ignore-qid to drop query ids)",
    ERR_INDEX_TOO_LARGE: "feature index does not fit int32 column ids (max 2147483647)",
    ERR_MULTILABEL: "multilabel line (comma-separated labels are not supported)",
    ERR_NAN_INF_LABEL: "NaN or infinite label",
}

# Number parser status, internal.
_NUM_OK = 0
_NUM_SLOW = 1
_NUM_BAD = 2
_NUM_NAN_INF = 3

_MAX_INT32 = 2147483647
_TWO_53 = 9007199254740992

_POW10 = np.array([10.0**i for i in range(23)], dtype=np.float64)


@njit
def _is_space(c):
    # bytes.split() whitespace, minus the line separator which is handled by the caller
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12


@njit
def _is_end(c):
    # a token ends at whitespace, a newline or a comment
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12 or c == 10 or c == 35


@njit
def _lower(c):
    if 65 <= c <= 90:
        return c + 32
    return c


@njit
def _matches_word(buf, start, stop, word):
    if stop - start != len(word):
        return False
    for i in range(len(word)):
        if _lower(buf[start + i]) != word[i]:
            return False
    return True


_NAN_WORDS = (
    np.frombuffer(b"nan", dtype=np.uint8).copy(),
    np.frombuffer(b"inf", dtype=np.uint8).copy(),
    np.frombuffer(b"infinity", dtype=np.uint8).copy(),
)
_NAN_WORD = _NAN_WORDS[0]
_INF_WORD = _NAN_WORDS[1]
_INFINITY_WORD = _NAN_WORDS[2]


@njit
def _parse_number(buf, start, stop, pow10, nan_word, inf_word, infinity_word):
    """Parse ``buf[start:stop]`` as a decimal float; return (status, value)."""
    pos = start
    negative = False
    if pos < stop and (buf[pos] == 43 or buf[pos] == 45):
        negative = buf[pos] == 45
        pos += 1
    if pos >= stop:
        return _NUM_BAD, 0.0
    # nan / inf / infinity, any case, optionally signed: Python's float accepts them
    first = buf[pos]
    if first == 110 or first == 78 or first == 105 or first == 73:
        if (
            _matches_word(buf, pos, stop, nan_word)
            or _matches_word(buf, pos, stop, inf_word)
            or _matches_word(buf, pos, stop, infinity_word)
        ):
            return _NUM_NAN_INF, 0.0
        return _NUM_BAD, 0.0
    # int64 arithmetic throughout: mixing uint64 and int64 makes numba go through float64
    mantissa = 0
    n_significant = 0
    n_digits = 0
    exponent10 = 0
    seen_point = False
    while pos < stop:
        c = buf[pos]
        if 48 <= c <= 57:
            n_digits += 1
            if mantissa == 0 and c == 48:
                # leading zeros are not significant; after the point they scale
                if seen_point:
                    exponent10 -= 1
            else:
                if n_significant < 18:
                    mantissa = mantissa * 10 + (c - 48)
                    if seen_point:
                        exponent10 -= 1
                elif not seen_point:
                    exponent10 += 1
                n_significant += 1
        elif c == 46 and not seen_point:
            seen_point = True
        else:
            break
        pos += 1
    if n_digits == 0:
        return _NUM_BAD, 0.0
    if pos < stop:
        c = buf[pos]
        if c != 101 and c != 69:
            return _NUM_BAD, 0.0
        pos += 1
        exp_negative = False
        if pos < stop and (buf[pos] == 43 or buf[pos] == 45):
            exp_negative = buf[pos] == 45
            pos += 1
        if pos >= stop:
            return _NUM_BAD, 0.0
        exp_value = 0
        while pos < stop:
            c = buf[pos]
            if not (48 <= c <= 57):
                return _NUM_BAD, 0.0
            if exp_value < 100000:
                exp_value = exp_value * 10 + (c - 48)
            pos += 1
        exponent10 += -exp_value if exp_negative else exp_value
    if mantissa == 0:
        return _NUM_OK, -0.0 if negative else 0.0
    if n_significant > 18 or mantissa > _TWO_53:
        return _NUM_SLOW, 0.0
    if exponent10 < -22 or exponent10 > 22:
        return _NUM_SLOW, 0.0
    # Clinger's fast path: mantissa and 10**|e| are exact doubles, so one IEEE operation
    # gives the correctly rounded result.
    value = float(mantissa)
    if exponent10 >= 0:
        value = value * pow10[exponent10]
    else:
        value = value / pow10[-exponent10]
    return _NUM_OK, -value if negative else value


@njit
def count_svmlight_bounds(buf):
    """Upper bounds of the rows and nonzeros of a buffer.

    Parameters
    ----------
    buf : ndarray of uint8

    Returns
    -------
    n_lines : int
        Number of ``\\n`` plus one (a bound on the rows).
    n_colons : int
        Number of ``:`` (a bound on the nonzeros).
    """
    n_lines = 1
    n_colons = 0
    for i in range(buf.shape[0]):
        c = buf[i]
        if c == 10:
            n_lines += 1
        elif c == 58:
            n_colons += 1
    return n_lines, n_colons


@njit
def _push_slow(slow_start, slow_stop, slow_target, n_slow, start, stop, target):
    # grows by doubling; a slow token is rare in usual files
    if n_slow == slow_start.shape[0]:
        new_size = max(16, 2 * n_slow)
        grown_start = np.empty(new_size, dtype=np.int64)
        grown_stop = np.empty(new_size, dtype=np.int64)
        grown_target = np.empty(new_size, dtype=np.int64)
        grown_start[:n_slow] = slow_start[:n_slow]
        grown_stop[:n_slow] = slow_stop[:n_slow]
        grown_target[:n_slow] = slow_target[:n_slow]
        slow_start, slow_stop, slow_target = grown_start, grown_stop, grown_target
    slow_start[n_slow] = start
    slow_stop[n_slow] = stop
    slow_target[n_slow] = target
    return slow_start, slow_stop, slow_target, n_slow + 1


@njit
def _number_error(status, bad, nan_inf):
    """The error code of a parsed number's ``status``: ``bad``, ``nan_inf`` or :data:`OK`."""
    if status == _NUM_BAD:
        return bad
    if status == _NUM_NAN_INF:
        return nan_inf
    return OK


@njit
def _feature_index(buf, token_start, colon, previous, allow_zero_index):
    """The column index of the feature token at ``token_start`` (``index:value``, its first
    colon at ``colon``, -1 if none): ``(OK, index)``, or ``(error code, 0)``.

    The index is an optional sign and decimal digits; it must fit int32, be above
    ``previous`` (sorted, no repeats), and be positive unless ``allow_zero_index`` (a
    negative zero is zero).
    """
    if colon < 0 or colon == token_start:
        return ERR_UNPARSABLE_TOKEN, 0
    index_pos = token_start
    index_negative = False
    if buf[index_pos] == 43 or buf[index_pos] == 45:
        index_negative = buf[index_pos] == 45
        index_pos += 1
    if index_pos >= colon:
        return ERR_UNPARSABLE_TOKEN, 0
    index = 0
    too_large = False
    while index_pos < colon:
        c = buf[index_pos]
        if not (48 <= c <= 57):
            return ERR_UNPARSABLE_TOKEN, 0
        if not too_large:
            index = index * 10 + (c - 48)
            if index > _MAX_INT32:
                too_large = True
        index_pos += 1
    if index_negative and index != 0:
        return ERR_BAD_INDEX, 0
    if too_large:
        return ERR_INDEX_TOO_LARGE, 0
    if index == 0 and not allow_zero_index:
        return ERR_BAD_INDEX, 0
    if index <= previous:
        return ERR_UNSORTED_INDEX, 0
    return OK, index


@njit
def parse_svmlight(
    buf,
    allow_zero_index,
    ignore_qid,
    labels,
    row_line,
    indptr,
    indices,
    values,
    pow10,
    nan_word,
    inf_word,
    infinity_word,
):
    """Parse complete svmlight lines of ``buf`` into preallocated CSR arrays.

    Parameters
    ----------
    buf : ndarray of uint8
        Whole lines (the last one may lack its ``\\n``).
    allow_zero_index : bool
        Accept index 0 (zero-based or auto-detected files).
    ignore_qid : bool
        Drop a ``qid:N`` token after the label instead of failing.
    labels, row_line, indptr, indices, values : ndarray
        Outputs sized by :func:`count_svmlight_bounds`: float64 labels and int64 0-based
        line numbers of each row, int64 ``indptr`` (``n_lines + 1``), int32 indices and float64
        values (``n_colons``).
    pow10, nan_word, inf_word, infinity_word : ndarray
        Constant tables (powers of ten, the words ``nan``, ``inf``, ``infinity``).

    Returns
    -------
    status : int
        ``OK`` or an error code of this module.
    n_rows, nnz : int
        Rows and nonzeros written.
    n_lines : int
        Lines consumed (whole buffer when ``status == OK``).
    error_line, error_start, error_stop : int
        0-based line and byte span of the offending token (``-1`` when ``OK``).
    min_index, max_index : int
        Smallest and largest feature index as written in the text (``-1`` when no nonzero).
    all_ones : bool
        Every value equals 1.
    slow_start, slow_stop, slow_target : ndarray of int64
        Byte spans of numbers to convert with :func:`resolve_slow_numbers`; target ``t >= 0`` is
        ``values[t]``, ``t < 0`` is ``labels[-t - 1]`` (first ``n_slow`` entries valid).
    n_slow : int
    """
    n = buf.shape[0]
    pos = 0
    line = 0
    n_rows = 0
    nnz = 0
    min_index = -1
    max_index = -1
    all_ones = True
    slow_start = np.empty(0, dtype=np.int64)
    slow_stop = np.empty(0, dtype=np.int64)
    slow_target = np.empty(0, dtype=np.int64)
    n_slow = 0
    indptr[0] = 0
    while pos < n:
        # one line: [pos, line_end)
        line_end = pos
        while line_end < n and buf[line_end] != 10:
            line_end += 1
        content_end = pos
        while content_end < line_end and buf[content_end] != 35:
            content_end += 1
        cursor = pos
        while cursor < content_end and _is_space(buf[cursor]):
            cursor += 1
        if cursor < content_end:
            # label
            token_start = cursor
            has_colon = False
            has_comma = False
            while cursor < content_end and not _is_space(buf[cursor]):
                if buf[cursor] == 58:
                    has_colon = True
                elif buf[cursor] == 44:
                    has_comma = True
                cursor += 1
            token_stop = cursor
            status, number = _NUM_BAD, 0.0
            if has_colon:
                error = ERR_MISSING_LABEL
            elif has_comma:
                error = ERR_MULTILABEL
            else:
                status, number = _parse_number(
                    buf, token_start, token_stop, pow10, nan_word, inf_word, infinity_word
                )
                error = _number_error(status, ERR_NON_NUMERIC_LABEL, ERR_NAN_INF_LABEL)
            if error != OK:
                return (
                    error, n_rows, nnz, line, line, token_start, token_stop,
                    min_index, max_index, all_ones, slow_start, slow_stop, slow_target, n_slow,
                )  # fmt: skip
            if status == _NUM_SLOW:
                slow_start, slow_stop, slow_target, n_slow = _push_slow(
                    slow_start, slow_stop, slow_target, n_slow, token_start, token_stop,
                    -n_rows - 1,
                )  # fmt: skip
                number = 0.0
            labels[n_rows] = number
            row_line[n_rows] = line
            previous = -1
            first_feature = True
            while True:
                while cursor < content_end and _is_space(buf[cursor]):
                    cursor += 1
                if cursor >= content_end:
                    break
                token_start = cursor
                colon = -1
                while cursor < content_end and not _is_space(buf[cursor]):
                    if buf[cursor] == 58 and colon < 0:
                        colon = cursor
                    cursor += 1
                token_stop = cursor
                error = OK
                if (
                    first_feature
                    and token_stop - token_start >= 3
                    and buf[token_start] == 113
                    and buf[token_start + 1] == 105
                    and buf[token_start + 2] == 100
                ):
                    # "qid..." right after the label, as scikit-learn recognizes it
                    first_feature = False
                    if ignore_qid and colon > token_start + 2:
                        continue
                    error = ERR_QID
                first_feature = False
                index = 0
                status, number = _NUM_BAD, 0.0
                if error == OK:
                    error, index = _feature_index(
                        buf, token_start, colon, previous, allow_zero_index
                    )
                if error == OK:
                    status, number = _parse_number(
                        buf, colon + 1, token_stop, pow10, nan_word, inf_word, infinity_word
                    )
                    error = _number_error(status, ERR_NON_NUMERIC_VALUE, ERR_NAN_INF_VALUE)
                if error != OK:
                    return (
                        error, n_rows, nnz, line, line, token_start, token_stop,
                        min_index, max_index, all_ones, slow_start, slow_stop, slow_target,
                        n_slow,
                    )  # fmt: skip
                previous = index
                if status == _NUM_SLOW:
                    slow_start, slow_stop, slow_target, n_slow = _push_slow(
                        slow_start, slow_stop, slow_target, n_slow, colon + 1, token_stop, nnz
                    )
                    # a slow token is never exactly 1 (1 takes the fast path); the caller
                    # rechecks after conversion anyway
                    number = 0.5
                if number != 1.0:
                    all_ones = False
                indices[nnz] = index
                values[nnz] = number
                nnz += 1
                if min_index < 0 or index < min_index:
                    min_index = index
                if index > max_index:
                    max_index = index
            n_rows += 1
            indptr[n_rows] = nnz
        line += 1
        pos = line_end + 1
    return (
        OK, n_rows, nnz, line, -1, -1, -1,
        min_index, max_index, all_ones, slow_start, slow_stop, slow_target, n_slow,
    )  # fmt: skip


@njit
def gather_tokens(buf, starts, stops, width):
    """Copy byte spans of ``buf`` into a zero-padded ``(n, width)`` uint8 table.

    Viewed as ``S<width>`` the table converts with NumPy's correctly rounded cast.
    """
    n = starts.shape[0]
    out = np.zeros((n, width), dtype=np.uint8)
    for i in range(n):
        length = stops[i] - starts[i]
        for j in range(length):
            out[i, j] = buf[starts[i] + j]
    return out


def resolve_slow_numbers(buf, slow_start, slow_stop, slow_target, labels, values):
    """Convert the numbers the kernel left to NumPy, in place.

    Parameters
    ----------
    buf : ndarray of uint8
    slow_start, slow_stop, slow_target : ndarray of int64
        As returned by :func:`parse_svmlight` (already cut to ``n_slow``).
    labels, values : ndarray of float64
        Outputs of :func:`parse_svmlight`, patched in place.

    Returns
    -------
    bad : int
        Index (into the spans) of the first span that does not convert to a finite number,
        or ``-1``.
    """
    if slow_start.shape[0] == 0:
        return -1
    width = int((slow_stop - slow_start).max())
    table = gather_tokens(buf, slow_start, slow_stop, width)
    # NumPy's bytes -> float64 cast rounds correctly (same result as Python's float()).
    numbers = table.view(f"S{width}").ravel().astype(np.float64)
    finite = np.isfinite(numbers)
    if not finite.all():
        return int(np.flatnonzero(~finite)[0])
    to_values = slow_target >= 0
    values[slow_target[to_values]] = numbers[to_values]
    labels[-slow_target[~to_values] - 1] = numbers[~to_values]
    return -1


@njit
def find_last_newline(buf):
    """Index of the last ``\\n`` in ``buf``, or ``-1``."""
    for i in range(buf.shape[0] - 1, -1, -1):
        if buf[i] == 10:
            return i
    return -1


@njit
def find_first_newline(buf, start):
    """Index of the first ``\\n`` at or after ``start``, or ``-1``."""
    for i in range(start, buf.shape[0]):
        if buf[i] == 10:
            return i
    return -1


@njit
def split_delimited(buf, delimiter, field_a, field_b, n_fields_expected, skip_first_line):
    """Locate two fields of every line of a delimited (CSV-like, unquoted) buffer.

    Parameters
    ----------
    buf : ndarray of uint8
        Whole lines.
    delimiter : int
        Byte value of the field separator.
    field_a, field_b : int
        0-based columns to locate.
    n_fields_expected : int
        Every non-empty line must have this many fields.
    skip_first_line : bool
        The first line is a header.

    Returns
    -------
    status : int
        0, or 1 for a line with the wrong number of fields.
    n_rows : int
    a_start, a_stop, b_start, b_stop : ndarray of int64
        Byte spans of the two fields (with surrounding whitespace and ``\\r`` removed).
    row_line : ndarray of int64
        0-based line of each row within the buffer (on error, the offending line is
        ``row_line[n_rows]``).
    """
    n = buf.shape[0]
    n_lines = 1
    for i in range(n):
        if buf[i] == 10:
            n_lines += 1
    a_start = np.empty(n_lines, dtype=np.int64)
    a_stop = np.empty(n_lines, dtype=np.int64)
    b_start = np.empty(n_lines, dtype=np.int64)
    b_stop = np.empty(n_lines, dtype=np.int64)
    row_line = np.empty(n_lines, dtype=np.int64)
    pos = 0
    line = 0
    n_rows = 0
    while pos < n:
        line_end = pos
        while line_end < n and buf[line_end] != 10:
            line_end += 1
        if line == 0 and skip_first_line:
            line += 1
            pos = line_end + 1
            continue
        blank = True
        for i in range(pos, line_end):
            if not _is_space(buf[i]):
                blank = False
                break
        if not blank:
            field = 0
            field_start = pos
            for i in range(pos, line_end + 1):
                if i == line_end or buf[i] == delimiter:
                    lo = field_start
                    hi = i
                    while lo < hi and _is_space(buf[lo]):
                        lo += 1
                    while hi > lo and _is_space(buf[hi - 1]):
                        hi -= 1
                    if field == field_a:
                        a_start[n_rows] = lo
                        a_stop[n_rows] = hi
                    if field == field_b:
                        b_start[n_rows] = lo
                        b_stop[n_rows] = hi
                    field += 1
                    field_start = i + 1
            row_line[n_rows] = line
            if field != n_fields_expected:
                return 1, n_rows, a_start, a_stop, b_start, b_stop, row_line
            n_rows += 1
        line += 1
        pos = line_end + 1
    return 0, n_rows, a_start, a_stop, b_start, b_stop, row_line


@njit
def split_fasta(buf):
    """Locate the records of a FASTA buffer made of whole records.

    Parameters
    ----------
    buf : ndarray of uint8

    Returns
    -------
    status : int
        0, or 1 when a non-blank line precedes the first header (``error_line``).
    n_records : int
    header_start, header_stop : ndarray of int64
        Byte spans of the header text (after ``>``, without the line end).
    header_line : ndarray of int64
        0-based line of each header within the buffer.
    sequences : ndarray of uint8
        Sequence letters of every record, concatenated (line ends and blanks removed).
    seq_start, seq_stop : ndarray of int64
        Span of each record in ``sequences``.
    error_line : int
    """
    n = buf.shape[0]
    n_headers = 0
    if n > 0 and buf[0] == 62:
        n_headers += 1
    for i in range(1, n):
        if buf[i] == 62 and buf[i - 1] == 10:
            n_headers += 1
    header_start = np.empty(n_headers, dtype=np.int64)
    header_stop = np.empty(n_headers, dtype=np.int64)
    header_line = np.empty(n_headers, dtype=np.int64)
    seq_start = np.empty(n_headers, dtype=np.int64)
    seq_stop = np.empty(n_headers, dtype=np.int64)
    sequences = np.empty(n, dtype=np.uint8)
    n_letters = 0
    record = -1
    pos = 0
    line = 0
    while pos < n:
        line_end = pos
        while line_end < n and buf[line_end] != 10:
            line_end += 1
        if buf[pos] == 62:
            if record >= 0:
                seq_stop[record] = n_letters
            record += 1
            stop = line_end
            while stop > pos + 1 and _is_space(buf[stop - 1]):
                stop -= 1
            header_start[record] = pos + 1
            header_stop[record] = stop
            header_line[record] = line
            seq_start[record] = n_letters
        else:
            for i in range(pos, line_end):
                c = buf[i]
                if _is_space(c):
                    continue
                if record < 0:
                    return (
                        1,
                        0,
                        header_start,
                        header_stop,
                        header_line,
                        sequences,
                        seq_start,
                        seq_stop,
                        line,
                    )
                sequences[n_letters] = c
                n_letters += 1
        line += 1
        pos = line_end + 1
    if record >= 0:
        seq_stop[record] = n_letters
    return 0, record + 1, header_start, header_stop, header_line, sequences, seq_start, seq_stop, -1


@njit
def encode_sequences(letters, starts, stops, length, allow_n, codes):
    """Encode DNA letters as 0..3 (A, C, G, T; either case) and 4 (N) into ``codes``.

    Parameters
    ----------
    letters : ndarray of uint8
    starts, stops : ndarray of int64
        Span of each sequence in ``letters``.
    length : int
        Required length of every sequence.
    allow_n : bool
        Accept ``N`` (unknown nucleotide).
    codes : ndarray of uint8 of shape (n_sequences, length)
        Output.

    Returns
    -------
    status : int
        0; 1 for a letter that is not allowed; 2 for a sequence of another length.
    row, position : int
        Offending sequence and 0-based position (``-1`` when ``status == 0``).
    """
    for row in range(starts.shape[0]):
        start = starts[row]
        if stops[row] - start != length:
            return 2, row, stops[row] - start
        for position in range(length):
            c = letters[start + position]
            if c == 65 or c == 97:
                codes[row, position] = 0
            elif c == 67 or c == 99:
                codes[row, position] = 1
            elif c == 71 or c == 103:
                codes[row, position] = 2
            elif c == 84 or c == 116:
                codes[row, position] = 3
            elif (c == 78 or c == 110) and allow_n:
                codes[row, position] = 4
            else:
                return 1, row, position
    return 0, -1, -1


@njit
def _write_int(out, pos, value):
    # decimal digits of a non-negative integer
    if value == 0:
        out[pos] = 48
        return pos + 1
    digits = 0
    probe = value
    while probe > 0:
        digits += 1
        probe //= 10
    for i in range(digits - 1, -1, -1):
        out[pos + i] = 48 + value % 10
        value //= 10
    return pos + digits


@njit
def format_svmlight(indptr, indices, fixed_values, scale_digits, label_table, label_width,
                    index_offset):  # fmt: skip
    """Format CSR rows as svmlight text with fixed-point values.

    Parameters
    ----------
    indptr : ndarray of int64
    indices : ndarray of int32 or int64
    fixed_values : ndarray of int64
        Values times ``10**scale_digits``, rounded.
    scale_digits : int
        Digits after the decimal point (trailing zeros are dropped).
    label_table : ndarray of uint8 of shape (n_rows, label_width)
        Label text of each row, zero-padded.
    label_width : int
    index_offset : int
        Added to column ids (1 for one-based text).

    Returns
    -------
    text : ndarray of uint8
    """
    n = indptr.shape[0] - 1
    nnz = indptr[n] - indptr[0]
    # a bound: label + per nonzero (20 digits index, ':', sign, 20 digits, '.', digits, ' ')
    out = np.empty(n * (label_width + 1) + nnz * (44 + scale_digits), dtype=np.uint8)
    scale = np.int64(1)
    for _ in range(scale_digits):
        scale *= 10
    pos = 0
    for i in range(n):
        for j in range(label_width):
            c = label_table[i, j]
            if c == 0:
                break
            out[pos] = c
            pos += 1
        for t in range(indptr[i], indptr[i + 1]):
            out[pos] = 32
            pos = _write_int(out, pos + 1, np.int64(indices[t]) + index_offset)
            out[pos] = 58
            pos += 1
            value = fixed_values[t]
            if value < 0:
                out[pos] = 45
                pos += 1
                value = -value
            pos = _write_int(out, pos, value // scale)
            fraction = value % scale
            if fraction:
                out[pos] = 46
                pos += 1
                digits = scale_digits
                while fraction % 10 == 0:
                    fraction //= 10
                    digits -= 1
                for k in range(digits - 1, -1, -1):
                    out[pos + k] = 48 + fraction % 10
                    fraction //= 10
                pos += digits
        out[pos] = 10
        pos += 1
    return out[:pos]
