"""The 'print' connector: writes each row as a line to stdout (or stderr), like Flink.

A line is the row kind's short string and the fields, e.g.
``+I[1, abc, 2024-01-01 00:00:05.000]``, prefixed by ``<print-identifier>> ``
and, when the sink runs in parallel, by the subtask number (1-based):
``id:2> +U[...]`` or ``2> +U[...]``.  The text is built column-wise with
Arrow string kernels; only the final join into lines is Python.
"""

from __future__ import annotations

import sys

import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.connectors import Option
from sqlstream.runtime.connectors.base import Connector, SinkContext, SinkWriter
from sqlstream.runtime.elements import RowKind

_KIND_OPEN = pa.array([k.short + "[" for k in RowKind], pa.string())


def value_text(arr: pa.Array) -> pa.Array:
    """Flink's text of each value: NULL as 'null', doubles with a fraction, arrays bracketed, maps
    as {k=v, ...}, rows as (f1, f2)."""
    t = arr.type
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        inner = value_text(arr.flatten())
        offsets = pc.subtract(arr.offsets, arr.offsets[0])
        joined = pc.binary_join(pa.ListArray.from_arrays(offsets, inner), ", ")
        text = pc.binary_join_element_wise("[", joined, "]", "")
        return pc.if_else(arr.is_null(), pa.scalar("null"), text)
    if pa.types.is_map(t):
        entries = pc.binary_join_element_wise(value_text(arr.keys), value_text(arr.items), "=")
        offsets = pa.array(arr.offsets.to_numpy())  # fresh: Arrow takes no mask with sliced offsets
        lists = pa.ListArray.from_arrays(offsets, entries, mask=arr.is_null() if arr.null_count else None)
        text = pc.binary_join_element_wise("{", pc.binary_join(lists, ", "), "}", "")
        return pc.fill_null(text, "null")
    if pa.types.is_struct(t):
        fields = [value_text(pc.struct_field(arr, [i])) for i in range(t.num_fields)]
        body = fields[0] if len(fields) == 1 else pc.binary_join_element_wise(*fields, ", ")
        text = pc.binary_join_element_wise("(", body, ")", "")
        return pc.if_else(arr.is_null(), pa.scalar("null"), text)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        text = arr.cast(pa.string())
    elif pa.types.is_timestamp(t):
        # TIMESTAMP_LTZ is shown as UTC wall-clock time, without the zone suffix.
        text = pc.cast(arr.cast(pa.timestamp(t.unit)), pa.string())
    elif pa.types.is_floating(t):
        text = pc.cast(arr, pa.string())
        plain = pc.match_substring_regex(text, r"^-?\d+$")
        text = pc.if_else(plain, pc.binary_join_element_wise(text, ".0", ""), text)
        # Java's spelling of the non-finite values.
        text = pc.replace_substring(pc.replace_substring(text, "nan", "NaN"), "inf", "Infinity")
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
        # Arrow has no hex kernel; bytes columns are rare in printed output.
        text = pa.array([None if v is None else f"x'{v.hex()}'" for v in arr.to_pylist()], pa.string())
    else:
        text = pc.cast(arr, pa.string())
    return pc.fill_null(text, "null")


class PrintSink(SinkWriter):
    """Formats each batch into lines and writes them in one call, then flushes."""

    def __init__(self, ctx: SinkContext) -> None:
        identifier = ctx.options.get("print-identifier")
        self._to_stderr = bool(ctx.options.get("standard-error"))
        parts = []
        if identifier:
            parts.append(identifier)
        if ctx.parallelism > 1:
            parts.append(str(ctx.subtask_index + 1))
        self._prefix = (":".join(parts) + "> ") if parts else ""

    def lines(self, batch: pa.RecordBatch, kinds: pa.Array | None) -> list[str]:
        """The printed line of each row."""
        n = batch.num_rows
        if kinds is None:
            opening: pa.Array | pa.Scalar = pa.scalar(self._prefix + "+I[")
        else:
            opening = pc.take(_KIND_OPEN, kinds)
            if self._prefix:
                opening = pc.binary_join_element_wise(self._prefix, opening, "")
        cells = [value_text(col) for col in batch.columns]
        if not cells:
            body: pa.Array | pa.Scalar = pa.scalar("")
        elif len(cells) == 1:
            body = cells[0]
        else:
            body = pc.binary_join_element_wise(*cells, ", ")
        text = pc.binary_join_element_wise(opening, body, "]", "")
        if isinstance(text, pa.Scalar):
            return [text.as_py()] * n
        return text.to_pylist()

    def write(self, batch: pa.RecordBatch, kinds: pa.Array | None) -> None:
        if batch.num_rows == 0:
            return
        out = sys.stderr if self._to_stderr else sys.stdout
        out.write("\n".join(self.lines(batch, kinds)) + "\n")
        out.flush()


CONNECTOR = Connector(
    "print",
    options=(
        Option("print-identifier", description="text printed before each line"),
        Option("standard-error", "bool", default=False, description="print to stderr instead of stdout"),
    ),
    create_sink=PrintSink,
    accepts_updates=True,
    description="prints each row to stdout, like Flink's print connector",
)
