"""ConstraintEnforcer: NOT NULL columns of a sink table checked before the sink, as Flink does."""

from __future__ import annotations

import pyarrow.compute as pc

from sqlstream.core.errors import DataError
from sqlstream.runtime.elements import Chunk
from sqlstream.runtime.operators.base import Operator, Output


class NotNullEnforcer(Operator):
    """Stateless: a row with NULL in a NOT NULL column fails the job (ERROR) or is dropped (DROP),
    per 'table.exec.sink.not-null-enforcer'; retractions are checked like insertions, as Flink's
    enforcer sees every row whatever its kind."""

    name = "ConstraintEnforcer"

    def __init__(self, columns: tuple[int, ...], names: tuple[str, ...], on_null: str) -> None:
        self.columns = columns
        self.names = names
        self.drop = on_null == "DROP"

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        batch = chunk.batch
        if all(batch.column(i).null_count == 0 for i in self.columns):
            return [chunk]
        if not self.drop:
            name = next(n for i, n in zip(self.columns, self.names, strict=True) if batch.column(i).null_count)
            raise DataError(
                f"Column '{name}' is NOT NULL, however, a null value is being written into it. You can set job "
                "configuration 'table.exec.sink.not-null-enforcer'='DROP' to suppress this exception and drop "
                "such records silently."
            )
        keep = pc.is_valid(batch.column(self.columns[0]))
        for i in self.columns[1:]:
            keep = pc.and_(keep, pc.is_valid(batch.column(i)))
        return [chunk.filter(keep)]
