"""The user-facing home of the UDF decorators: ``from sqlstream.udf import udf, AggregateFunction``.

They are defined in :mod:`sqlstream.core.udf`, below both the planner (which types and registers
them) and the runtime (which calls them).
"""

from sqlstream.core.udf import AggregateFunction, udf

__all__ = ["AggregateFunction", "udf"]
