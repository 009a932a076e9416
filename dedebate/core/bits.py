"""Bit tables: the 2^q answer patterns of q bits as a constant [2^q, q] array."""

import numpy as np

MAX_TABLE_BITS = 20


def bit_table(q: int) -> np.ndarray:
    """The int8 numpy table ``[2^q, q]`` of all patterns of ``0 <= q <= MAX_TABLE_BITS`` bits.

    ``bits[z, i]`` is bit ``i`` of the integer ``z`` (little-endian), so row ``z`` is the pattern
    whose integer code is ``z = sum_i bits[z, i] 2^i``.
    """
    if not isinstance(q, (int, np.integer)) or q < 0 or q > MAX_TABLE_BITS:
        raise ValueError(f"q={q!r}: a bit table needs an integer 0 <= q <= {MAX_TABLE_BITS}")
    codes = np.arange(2**q, dtype=np.int64)[:, None]
    return ((codes >> np.arange(q, dtype=np.int64)[None, :]) & 1).astype(np.int8)


def bits_to_code(bits) -> np.ndarray:
    """Inverse of :func:`bit_table`: 0/1 bits ``[..., q]`` -> int64 codes ``[...]``."""
    raw = np.asarray(bits)
    if not np.isin(raw, (0, 1)).all():  # [2, 0] read as the code of [0, 1]
        raise ValueError("bits: a code is made of bits, 0 or 1")
    bits = raw.astype(np.int64)
    return (bits << np.arange(bits.shape[-1], dtype=np.int64)).sum(axis=-1)
