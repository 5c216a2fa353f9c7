"""Per-row random values: RAND, RAND_INTEGER and UUID, as Flink computes them.

Flink's generated code holds one ``java.util.Random`` per call site and operator instance (seeded
when the call gives a seed) and draws from it row after row. A seeded call here replays the same
sequence: java.util.Random is a 48-bit linear congruential generator, so the k-th state after a seed
is ``A_k * s + C_k (mod 2^48)`` and a whole batch of states comes from cumulative products and sums
in numpy (uint64 arithmetic wraps modulo 2^64, a multiple of 2^48) instead of a loop per row.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from sqlstream.core.functions import ArgumentTypeError, Value, register
from sqlstream.core.functions.strings import INTEGER, constant, returns

_MULTIPLIER = np.uint64(0x5DEECE66D)
_ADDEND = np.uint64(0xB)
_MASK = np.uint64((1 << 48) - 1)


class JavaRandom:
    """java.util.Random's sequence from a seed, drawn a batch at a time."""

    def __init__(self, seed: int) -> None:
        self.state = np.uint64((seed ^ 0x5DEECE66D) & ((1 << 48) - 1))

    def _states(self, n: int) -> np.ndarray:
        """The next ``n`` generator states, the generator left after the last of them."""
        if n == 0:
            return np.empty(0, np.uint64)
        with np.errstate(over="ignore"):
            powers = np.cumprod(np.full(n, _MULTIPLIER, np.uint64), dtype=np.uint64)  # a^1 .. a^n
            ones = np.concatenate([[np.uint64(1)], powers[:-1]])  # a^0 .. a^(n-1)
            sums = np.cumsum(ones, dtype=np.uint64) * _ADDEND  # c (1 + a + ... + a^(k-1))
            states = (powers * self.state + sums) & _MASK
        self.state = states[-1]
        return states

    def next_double(self, n: int) -> np.ndarray:
        """``n`` draws of nextDouble(): next(26) and next(27) of two states make 53 bits."""
        states = self._states(2 * n)
        high = (states[0::2] >> np.uint64(22)).astype(np.int64)
        low = (states[1::2] >> np.uint64(21)).astype(np.int64)
        return ((high << 27) + low).astype(np.float64) * 2.0**-53

    def next_int(self, n: int, bound: int) -> np.ndarray:
        """``n`` draws of nextInt(bound): one next(31) each, redrawn (rarely) where Java's
        rejection test fails, so that every value is equally likely."""
        if bound & -bound == bound:  # a power of two: the top bits
            return (bound * (self._states(n) >> np.uint64(17)).astype(np.int64)) >> 31
        out: list[np.ndarray] = []
        while n:
            start = self.state
            bits = (self._states(n) >> np.uint64(17)).astype(np.int64)
            values = bits % bound
            rejected = np.flatnonzero(bits - values + (bound - 1) >= 2**31)
            if not len(rejected):
                out.append(values)
                break
            first = int(rejected[0])
            out.append(values[:first])
            # the generator stands after the rejected draw; the rows from it on draw again
            self.state = start
            self._states(first + 1)
            n -= first
        return np.concatenate(out) if out else np.empty(0, np.int64)


def _seed(value: Value, name: str) -> int:
    return int(constant(value, name, "the seed"))


def _rand() -> Callable[..., Value]:
    """RAND() / RAND(seed): a DOUBLE in [0, 1) per row."""
    generator: list[JavaRandom | np.random.Generator] = []

    def kernel(*args: Value, rows: int) -> Value:
        if not generator:
            generator.append(JavaRandom(_seed(args[0], "RAND")) if args else np.random.default_rng())
        g = generator[0]
        values = g.next_double(rows) if isinstance(g, JavaRandom) else g.random(rows)
        return pa.array(values, pa.float64())

    return kernel


def _rand_integer() -> Callable[..., Value]:
    """RAND_INTEGER(bound) / RAND_INTEGER(seed, bound): an INT in [0, bound) per row."""
    generator: list[JavaRandom | np.random.Generator] = []

    def kernel(*args: Value, rows: int) -> Value:
        bound = int(constant(args[-1], "RAND_INTEGER", "the bound"))
        if bound <= 0:
            raise ArgumentTypeError(f"RAND_INTEGER: the bound must be positive, got {bound}")
        if not generator:
            generator.append(JavaRandom(_seed(args[0], "RAND_INTEGER")) if len(args) == 2 else np.random.default_rng())
        g = generator[0]
        values = g.next_int(rows, bound) if isinstance(g, JavaRandom) else g.integers(0, bound, rows)
        return pa.array(values, pa.int32())

    return kernel


_HEX = np.array([f"{i:02x}" for i in range(256)])


def _uuid() -> Callable[..., Value]:
    """UUID(): a random (version 4) UUID string per row."""
    rng = np.random.default_rng()

    def kernel(*, rows: int) -> Value:
        raw = rng.integers(0, 256, (rows, 16), dtype=np.uint8)
        raw[:, 6] = (raw[:, 6] & 0x0F) | 0x40  # version 4
        raw[:, 8] = (raw[:, 8] & 0x3F) | 0x80  # the IETF variant
        pairs = _HEX[raw]
        text = pairs[:, 0]
        for i in range(1, 16):
            if i in (4, 6, 8, 10):
                text = np.char.add(text, "-")
            text = np.char.add(text, pairs[:, i])
        return pa.array(text, pa.string())

    return kernel


register("RAND", returns("RAND", pa.float64(), INTEGER), _rand, 0, 1, per_site=True)
register("RAND_INTEGER", returns("RAND_INTEGER", pa.int32(), INTEGER, INTEGER), _rand_integer, 1, 2, per_site=True)
register("UUID", returns("UUID", pa.string()), _uuid, 0, per_site=True)
