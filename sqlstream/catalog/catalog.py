"""The session catalog: named tables and views, looked up case-insensitively."""

from __future__ import annotations

import difflib

from sqlstream.core.errors import CatalogError
from sqlstream.core.tables import TableDef, ViewDef

CatalogObject = TableDef | ViewDef


class Catalog:
    """Tables and views of one session (persistence across sessions builds on this)."""

    def __init__(self) -> None:
        self._objects: dict[str, CatalogObject] = {}

    def create(self, obj: CatalogObject, if_not_exists: bool = False) -> None:
        key = obj.name.lower()
        if key in self._objects:
            if if_not_exists:
                return
            kind = "table" if isinstance(obj, TableDef) else "view"
            raise CatalogError(f"{kind} '{obj.name}' already exists")
        self._objects[key] = obj

    def drop(self, name: str, kind: type, if_exists: bool = False) -> None:
        obj = self._objects.get(name.lower())
        what = "table" if kind is TableDef else "view"
        if obj is None or not isinstance(obj, kind):
            if if_exists:
                return
            raise CatalogError(f"{what} '{name}' does not exist{self._hint(name)}")
        del self._objects[name.lower()]

    def get(self, name: str) -> CatalogObject | None:
        return self._objects.get(name.lower())

    def require(self, name: str) -> CatalogObject:
        obj = self.get(name)
        if obj is None:
            raise CatalogError(f"table or view '{name}' does not exist{self._hint(name)}")
        return obj

    def _hint(self, name: str) -> str:
        close = difflib.get_close_matches(name.lower(), list(self._objects), n=1)
        return f"; did you mean '{self._objects[close[0]].name}'?" if close else ""

    def tables(self) -> list[TableDef]:
        return sorted((o for o in self._objects.values() if isinstance(o, TableDef)), key=lambda o: o.name)

    def views(self) -> list[ViewDef]:
        return sorted((o for o in self._objects.values() if isinstance(o, ViewDef)), key=lambda o: o.name)

    def names(self) -> list[str]:
        return sorted(o.name for o in self._objects.values())
