"""Flink's keyed state primitives over a KeyedState: value, list and map state.

Operators keep one KeyedState per named state; these views give it the
familiar shapes.  Values stay immutable once stored (a list or map is
replaced, never changed in place), which is what lets a snapshot freeze the
state by copying references; TTL comes from the underlying KeyedState.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlstream.runtime.state.base import KeyedState


class ValueState:
    def __init__(self, state: KeyedState) -> None:
        self.state = state

    def value(self, kg: int, key: tuple) -> Any | None:
        return self.state.get(kg, key)

    def update(self, kg: int, key: tuple, value: Any) -> None:
        self.state.put(kg, key, value)

    def clear(self, kg: int, key: tuple) -> None:
        self.state.delete(kg, key)


class ListState:
    def __init__(self, state: KeyedState) -> None:
        self.state = state

    def get(self, kg: int, key: tuple) -> tuple:
        return self.state.get(kg, key) or ()

    def add(self, kg: int, key: tuple, *items: Any) -> None:
        self.state.put(kg, key, self.get(kg, key) + items)

    def update(self, kg: int, key: tuple, items: list[Any]) -> None:
        if items:
            self.state.put(kg, key, tuple(items))
        else:
            self.state.delete(kg, key)

    def clear(self, kg: int, key: tuple) -> None:
        self.state.delete(kg, key)


class MapState:
    def __init__(self, state: KeyedState) -> None:
        self.state = state

    def _map(self, kg: int, key: tuple) -> dict:
        return self.state.get(kg, key) or {}

    def get(self, kg: int, key: tuple, user_key: Any) -> Any | None:
        return self._map(kg, key).get(user_key)

    def put(self, kg: int, key: tuple, user_key: Any, value: Any) -> None:
        self.state.put(kg, key, {**self._map(kg, key), user_key: value})

    def remove(self, kg: int, key: tuple, user_key: Any) -> None:
        current = self._map(kg, key)
        if user_key in current:
            rest = {k: v for k, v in current.items() if k != user_key}
            if rest:
                self.state.put(kg, key, rest)
            else:
                self.state.delete(kg, key)

    def items(self, kg: int, key: tuple) -> Iterator[tuple[Any, Any]]:
        yield from self._map(kg, key).items()

    def contains(self, kg: int, key: tuple, user_key: Any) -> bool:
        return user_key in self._map(kg, key)
