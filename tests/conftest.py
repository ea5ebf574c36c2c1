"""Fixtures for every test directory: the session's private PostgreSQL server, and stores on either backend."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.pg import PostgresServer


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A private PostgreSQL server for the session (started at first use, stopped and removed at the end)."""
    server = PostgresServer()
    try:
        yield server
    finally:
        server.close()


class StoreFactory:
    """Opens stores on one location (a SQLite file, or a fresh PostgreSQL database) of one backend.

    Every call opens another store (another connection) on the same data, as
    a restarted controller or a second one would; all are closed at the end.
    """

    def __init__(self, backend: str, url: str, server: PostgresServer | None) -> None:
        self.backend = backend
        self.url = url
        self.server = server
        self._opened: list[Any] = []

    def __call__(self, **options: Any) -> Any:
        if self.backend == "sqlite":
            from sluicegate.controller.store.sqlite import SqliteStore

            store: Any = SqliteStore(self.url, **options)
        else:
            from sluicegate.controller.store.postgres import PostgresStore

            store = PostgresStore(self.url, **options)
        self._opened.append(store)
        return store

    def stored(self) -> dict[str, int]:
        """name -> resource version, as a fresh reader (another connection) sees the store."""
        reader = self()
        try:
            return {o.name: o.resource_version for o in reader.load()}
        finally:
            reader.close()

    def close(self) -> None:
        for store in self._opened:
            try:
                store.close()
            except Exception:  # noqa: BLE001 - a test may have closed or broken it already
                pass


def new_factory(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> StoreFactory:
    if backend == "sqlite":
        return StoreFactory("sqlite", str(tmp_path / "store.db"), None)
    server: PostgresServer = request.getfixturevalue("postgres")
    return StoreFactory("postgresql", server.create_database(), server)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """Stores of each backend: SQLite in tmp_path, PostgreSQL in a fresh database on the session's server."""
    factory = new_factory(request.param, tmp_path, request)
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture
def make_store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[str], StoreFactory]]:
    """More than one store location in a test (a source and a destination): ``make_store_factory(backend)``."""
    made: list[StoreFactory] = []

    def make(backend: str) -> StoreFactory:
        factory = new_factory(backend, tmp_path / f"{backend}-{len(made)}", request)
        made.append(factory)
        return factory

    try:
        yield make
    finally:
        for factory in made:
            factory.close()
