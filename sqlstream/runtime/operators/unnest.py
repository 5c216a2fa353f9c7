"""Unnest: each row joined with the elements of an ARRAY or MAP it holds (CROSS JOIN UNNEST, LEFT
JOIN UNNEST ... ON TRUE; a map's entries in its stored order), vectorized: the collection's elements are flattened once per batch and
the input rows repeated by their element counts (``take``), as Flink's correlate emits them."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.evaluator import as_array, compile_expr
from sqlstream.core.expressions import Expr
from sqlstream.runtime.elements import Chunk
from sqlstream.runtime.operators.base import Operator, Output


class UnnestOperator(Operator):
    """Stateless: a row with n elements becomes n rows of the same kind (a LEFT unnest keeps a row
    with none as one NULL-padded row), so a retraction withdraws what its insertion added."""

    name = "Unnest"

    def __init__(self, collection: Expr, ordinality: bool, left: bool, schema: pa.Schema) -> None:
        self.collection = compile_expr(collection)
        self.collection_type = collection.type
        self.ordinality = ordinality
        self.left = left
        self.schema = schema

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        batch = chunk.batch
        n = batch.num_rows
        values = as_array(self.collection(batch), n, self.collection_type)
        if pa.types.is_map(values.type):
            entries = pa.StructArray.from_arrays([values.keys, values.items], ["key", "value"])
            values = pa.ListArray.from_arrays(pa.array(values.offsets.to_numpy()), entries,
                                              mask=values.is_null() if values.null_count else None)
        lengths = np.diff(values.offsets.to_numpy())
        if values.null_count:
            lengths = np.where(values.is_null().to_numpy(zero_copy_only=False), 0, lengths)
        flat = values.flatten()
        if pa.types.is_struct(flat.type) and flat.null_count:
            # a NULL ROW element has no fields to expand into: Flink's UNNEST skips it (a NULL
            # scalar element is a row with a NULL)
            valid = flat.is_valid().to_numpy(zero_copy_only=False)
            flat = flat.filter(pa.array(valid))
            lengths = np.bincount(np.repeat(np.arange(n), lengths)[valid], minlength=n)
        counts = np.maximum(lengths, 1) if self.left else lengths
        rows = np.repeat(np.arange(n), counts)
        if len(rows) == 0:
            return []
        # each output row's position in its collection; a padding row (count 1, length 0) has none
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        position = np.arange(len(rows)) - np.repeat(starts, counts)
        present = position < np.repeat(lengths, counts)
        first = np.concatenate([[0], np.cumsum(lengths)[:-1]])  # of each row's elements, flattened
        at = pa.array(np.where(present, np.repeat(first, counts) + position, 0), mask=~present)
        elements = flat.take(at) if len(flat) else pa.nulls(len(rows), flat.type)
        if pa.types.is_struct(elements.type):
            columns = [pc.struct_field(elements, [i]) for i in range(elements.type.num_fields)]
        else:
            columns = [elements]
        if self.ordinality:
            columns.append(pa.array((position + 1).astype(np.int32), mask=~present))
        taken = batch.take(pa.array(rows))
        out = pa.RecordBatch.from_arrays([*taken.columns, *columns], schema=self.schema)
        kinds = None if chunk.kinds is None else chunk.kinds.take(pa.array(rows))
        return [Chunk(out, kinds, chunk.split)]
