"""What every layer shares: types, expressions, functions, plans' configs, errors.

Importing it first tells pyarrow not to import pandas for its first list conversion
(see pandas_deferral): every part of sqlstream imports core before it converts anything.
"""

from sqlstream.core.pandas_deferral import defer_pandas

defer_pandas()
