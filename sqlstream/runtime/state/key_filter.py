"""A Bloom filter over 64-bit key hashes in numpy, so an operator keeping rows in RocksDB skips
the lookups of keys it has never stored.

Looking a key up in RocksDB costs 1.5-2 us even when it is absent (measured with 4 M keys: the
memtables' and every L0 file's bloom filter probed, a DRAM miss each, plus rocksdict's multi-get
overhead), about half of a new key's cost in the GROUP BY.  The operators already hold each key's
64-bit hash (hashing.hash_columns, which also gives the key group), so one numpy probe per key
here answers "surely absent" for nearly all new keys, and only the rest are looked up.

Blocked: a key sets 3 bits of one 64-bit word (one cache line touched per key, probes and
inserts are a handful of vectorized operations over a batch).  It has no fixed size: it is a
list of parts, each four times the capacity of the one before (few parts to probe), keys going into the newest, a probe
asking all of them.  Its memory is capped (``max_bytes``): once the cap is reached the newest
part takes every further key, so the false-positive rate rises with the state (then more keys
are looked up, answers stay exact).  A filter answers "maybe" for a key that was deleted since
(Bloom filters cannot forget): such a key is looked up and found absent, as without the filter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    from sqlstream.runtime.state.rocksdb import RocksDBState

# bits per key a part is sized for: with 3 bits in one word, about 1.5 % false positives
BITS_PER_KEY = 12
# the first part's words (64 kB: 43 k keys)
FIRST_WORDS = 1 << 13
# multiplies the key hash before its bits are taken: the key hash's low bits give the key group, so
# within one subtask they are far from uniform
_SPREAD = np.uint64(0xD6E8FEB86659FD93)
_WORD_SHIFT = np.uint64(32)
_SIX = np.uint64(6)
_BIT = np.uint64(63)
_ONE = np.uint64(1)


class HashFilter:
    """Which 64-bit key hashes may have been added (False: surely never added)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max(max_bytes, 8 * FIRST_WORDS)
        self.parts: list[np.ndarray] = []  # uint64 words, a power-of-two count each
        self.capacity = 0  # keys the newest part is sized for
        self.filled = 0  # keys added to the newest part

    @property
    def nbytes(self) -> int:
        return sum(p.nbytes for p in self.parts)

    @staticmethod
    def _probe(hashes: np.ndarray, words: int) -> tuple[np.ndarray, np.ndarray]:
        """(word index, mask of the 3 bits) of each hash in a part of ``words`` words."""
        with np.errstate(over="ignore"):
            h = hashes.astype(np.uint64, copy=False) * _SPREAD
        index = (h >> _WORD_SHIFT) & np.uint64(words - 1)
        mask = (_ONE << (h & _BIT)) | (_ONE << ((h >> _SIX) & _BIT)) | (_ONE << ((h >> (_SIX + _SIX)) & _BIT))
        return index.astype(np.intp), mask

    def may_contain(self, hashes: np.ndarray) -> np.ndarray:
        """Per hash: False if it was surely never added."""
        found = np.zeros(len(hashes), bool)
        for part in self.parts:
            index, mask = self._probe(hashes, len(part))
            found |= (part[index] & mask) == mask
        return found

    def add(self, hashes: np.ndarray) -> None:
        """Add hashes (already added ones may come again: they only count towards the sizing)."""
        start = 0
        while start < len(hashes):
            if self.filled >= self.capacity:
                self._grow()
            chunk = hashes[start: start + self.capacity - self.filled]
            part = self.parts[-1]
            index, mask = self._probe(chunk, len(part))
            np.bitwise_or.at(part, index, mask)
            self.filled += len(chunk)
            start += len(chunk)

    def _grow(self) -> None:
        """A new part of four times the newest one's capacity, or what is left under the cap."""
        words = FIRST_WORDS if not self.parts else 4 * len(self.parts[-1])
        left = self.max_bytes - self.nbytes
        while words * 8 > left and words > 1:
            words //= 2
        if self.parts and words < len(self.parts[-1]) // 2:
            # too little room left for a part worth having: the newest part takes every further key
            self.capacity = self.filled + (1 << 62)
            return
        self.parts.append(np.zeros(words, np.uint64))
        self.capacity = words * 64 // BITS_PER_KEY
        self.filled = 0


class StoredKeys:
    """A HashFilter of the keys of one RocksDB state (column family) that an operator writes, kept in
    step with the state: which keys of a batch may be stored (the others skip their lookup).

    The filter knows the keys the operator added through ``wrote``; entries that arrived around it
    (a restore of RocksDB's files through a checkpoint, a rescaling copy, anything else: seen as
    another column family or an entry count it did not leave) make it start again from a scan of
    the stored keys, ``chunk`` keys per call of ``may_contain`` (``hashes_of`` gives their key
    hashes from their bytes), every key answering "maybe" until the scan is through.  Its memory is
    capped at ``max_bytes`` (RocksDBMemory.filter_bytes).  The state's memtables then drop their
    own bloom filter (RocksDBState.keep_own_filter): nearly every lookup left finds its key."""

    def __init__(self, state: RocksDBState, max_bytes: int, chunk: int,
                 hashes_of: Callable[[pa.BinaryArray], np.ndarray]) -> None:
        state.keep_own_filter()
        self.state = state
        self.max_bytes = max_bytes
        self.chunk = chunk
        self.hashes_of = hashes_of
        self.filter = HashFilter(max_bytes)
        # the column family and entry count the filter knows: an empty state (0), so entries restored
        # before this object was made are scanned
        self.cf = state.cf
        self.count = 0
        self.rebuild_from: bytes | None = None  # the next key to scan while the filter is rebuilt

    @property
    def in_step(self) -> bool:
        """Whether the state holds only entries the filter knows of."""
        return self.state.cf is self.cf and len(self.state) == self.count

    def may_contain(self, hashes: np.ndarray) -> np.ndarray:
        """Per key hash: False if the key is surely not stored (then it need not be looked up)."""
        if not self.in_step:
            self.filter = HashFilter(self.max_bytes)
            self.cf, self.count = self.state.cf, len(self.state)
            self.rebuild_from = b"" if self.count else None
        if self.rebuild_from is None:
            return self.filter.may_contain(hashes)
        raw = self.state.keys_from(self.rebuild_from, self.chunk)
        if raw:
            self.filter.add(self.hashes_of(pa.array(raw, pa.binary())))
        self.rebuild_from = raw[-1] + b"\0" if len(raw) == self.chunk else None  # the next key after the last
        return np.ones(len(hashes), bool)

    def wrote(self, hashes: np.ndarray, before: int) -> None:
        """The keys ``hashes`` were just written (with others the filter holds) into the state, which
        held ``before`` entries: into the filter, which stays in step if it was."""
        self.filter.add(hashes)
        self.deleted(before)

    def deleted(self, before: int) -> None:
        """Entries were deleted (the filter keeps them: looked up, found absent) from the state, which
        held ``before`` entries: still in step if it was."""
        if self.state.cf is self.cf and self.count == before:
            self.count = len(self.state)
