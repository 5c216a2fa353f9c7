"""Keep pyarrow from importing pandas on its first conversion of a Python list.

pyarrow's ``pa.array(obj)`` asks, the first time it meets an object that is
not a numpy array, whether pandas is installed, and imports it to find out:
0.15-0.25 s of CPU, a third of the start-up of ``sqlstream run`` on this
machine, for a library no job uses.  pyarrow remembers that first answer
for these checks only: every pyarrow call that really needs pandas
(``to_pandas``, ``Table.from_pandas``) asks again and imports it then.  So
the first check is answered "not installed" here, with the import of pandas
refused for that one call, and pandas is imported where a front-end hands
pandas objects to pyarrow (``restore_pandas``).
"""

from __future__ import annotations

import importlib.abc
import sys
from importlib.machinery import ModuleSpec
from types import ModuleType

import pyarrow as pa


class _RefusePandas(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: object, target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname == "pandas" or fullname.startswith("pandas."):
            raise ImportError("pandas is imported when first used")
        return None


def defer_pandas() -> None:
    """Make pyarrow's first "is pandas installed?" check answer no, unless pandas is already loaded."""
    if "pandas" in sys.modules:
        return
    refuse = _RefusePandas()
    sys.meta_path.insert(0, refuse)
    try:
        pa.array([None])  # the check runs on the first Python sequence converted
    finally:
        sys.meta_path.remove(refuse)


def restore_pandas() -> None:
    """Import pandas and have pyarrow recognise pandas objects again (before ``Table.from_pandas``:
    without this, a categorical column would be read as a plain sequence of its values)."""
    pa.array([], pa.int8()).to_pandas()  # a conversion that needs pandas makes pyarrow import it
