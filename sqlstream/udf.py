"""The user-facing home of the UDF decorators: ``from sqlstream.udf import udf, udtf, AggregateFunction,
TableFunction``.

They are defined in :mod:`sqlstream.core.udf`, below both the planner (which types and registers
them) and the runtime (which calls them).
"""

from sqlstream.core.udf import AggregateFunction, TableFunction, udf, udtf

__all__ = ["AggregateFunction", "TableFunction", "udf", "udtf"]
