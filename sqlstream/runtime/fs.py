"""Paths and URIs of files and directories: local folders and object stores through ``pyarrow.fs``.

A path is a local one (``/data/out``, ``out``, ``file:///data/out``) or a URI
of a store: ``s3://bucket/key`` (also ``s3a://`` and ``s3p://``, Flink's
names), ``gs://``, ``abfs://``/``abfss://`` and ``hdfs://``.  S3 is
configured with Flink's keys (``s3.endpoint``, ``s3.access-key``,
``s3.secret-key``, ``s3.path.style.access``, ``s3.region``, set with SET);
the other stores with their usual environment (``pyarrow.fs.FileSystem.from_uri``).

Every request to a store has a bounded connect timeout and a few retries, so
an unreachable endpoint or refused credentials fail with a
:class:`StorageError` naming the path and the endpoint instead of hanging.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow.fs as pafs

from sqlstream.core.errors import SqlStreamError

S3_SCHEMES = ("s3", "s3a", "s3p")
REMOTE_SCHEMES = (*S3_SCHEMES, "gs", "gcs", "abfs", "abfss", "hdfs", "viewfs")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")

# bounded, so a wrong endpoint fails in seconds: a connect attempt, and attempts per request
CONNECT_TIMEOUT_S = 3.0
REQUEST_TIMEOUT_S = 30.0
MAX_ATTEMPTS = 3
_COPY_BLOCK = 1 << 20


class StorageError(SqlStreamError):
    """A file or directory on a store cannot be reached, read or written."""


def scheme_of(path: str) -> str | None:
    """The URI scheme of ``path`` in lower case, or None for a plain local path."""
    m = _SCHEME.match(path)
    return m.group(1).lower() if m else None


def check_path(path: str) -> None:
    """Refuse, before anything runs, a URI whose scheme no file system here serves."""
    scheme = scheme_of(path)
    if scheme not in (None, "file", *REMOTE_SCHEMES):
        raise StorageError(f"path '{path}': unsupported scheme '{scheme}://' "
                           f"(supported: file, {', '.join(REMOTE_SCHEMES)})")


def is_remote(path: str | os.PathLike[str]) -> bool:
    return scheme_of(str(path)) in REMOTE_SCHEMES


@dataclass(frozen=True)
class Location:
    """A directory or file on a file system: ``fs`` with ``path`` in its own notation
    (``bucket/key`` for S3, absolute for local), ``uri`` as it is shown in messages."""

    fs: pafs.FileSystem
    path: str
    uri: str
    endpoint: str | None = None

    @property
    def remote(self) -> bool:
        return not isinstance(self.fs, pafs.LocalFileSystem)

    def child(self, *names: str) -> Location:
        path = "/".join([self.path.rstrip("/"), *names])
        uri = "/".join([self.uri.rstrip("/"), *names])
        return Location(self.fs, path, uri, self.endpoint)

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    def where(self) -> str:
        """The path as the user named it, with the endpoint it was sent to."""
        return f"'{self.uri}'" + (f" (endpoint {self.endpoint})" if self.endpoint else "")

    def error(self, action: str, e: BaseException) -> StorageError:
        """A StorageError for a failed ``action`` on this location, with the store's reason in one line."""
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return StorageError(f"cannot {action} {self.where()}: {reason}")

    # -- the few operations everything here needs, each failing with a StorageError

    def info(self) -> pafs.FileInfo:
        try:
            return self.fs.get_file_info(self.path)
        except OSError as e:
            raise self.error("access", e) from None

    def exists(self) -> bool:
        return self.info().type != pafs.FileType.NotFound

    def is_dir(self) -> bool:
        return self.info().type == pafs.FileType.Directory

    def make_dirs(self) -> None:
        try:
            self.fs.create_dir(self.path, recursive=True)
        except OSError as e:
            raise self.error("create the directory", e) from None

    def list(self, recursive: bool = True) -> list[pafs.FileInfo]:
        """The entries under this directory (none if it does not exist)."""
        try:
            return self.fs.get_file_info(pafs.FileSelector(self.path, allow_not_found=True, recursive=recursive))
        except OSError as e:
            raise self.error("list", e) from None

    def read_bytes(self) -> bytes:
        try:
            with self.fs.open_input_stream(self.path) as f:
                return f.read()
        except OSError as e:
            raise self.error("read", e) from None

    def write_bytes(self, data: bytes) -> None:
        """Write the whole object; on a store it appears complete or not at all."""
        try:
            with self.fs.open_output_stream(self.path) as f:
                f.write(data)
        except OSError as e:
            raise self.error("write", e) from None

    def upload(self, local: str | os.PathLike[str]) -> None:
        """Copy a local file to this location (an object store shows it only once complete)."""
        try:
            with open(local, "rb") as src, self.fs.open_output_stream(self.path) as dst:
                shutil.copyfileobj(src, dst, _COPY_BLOCK)
        except OSError as e:
            raise self.error("write", e) from None

    def download(self, local: str | os.PathLike[str]) -> None:
        """Copy this file to a local one."""
        try:
            with self.fs.open_input_stream(self.path) as src, open(local, "wb") as dst:
                shutil.copyfileobj(src, dst, _COPY_BLOCK)
        except OSError as e:
            raise self.error("read", e) from None

    def move_to(self, target: Location) -> None:
        """Rename (atomic on a local disk; copy then delete on an object store, where replaying
        it after a crash between the two copies the same bytes again)."""
        try:
            self.fs.move(self.path, target.path)
        except OSError as e:
            raise self.error(f"move to {target.where()}", e) from None

    def delete(self) -> None:
        """Remove this file if it exists."""
        try:
            self.fs.delete_file(self.path)
        except FileNotFoundError:
            pass
        except OSError as e:
            if self.exists():
                raise self.error("delete", e) from None

    def delete_dir(self) -> None:
        """Remove this directory and everything under it, if it exists."""
        try:
            self.fs.delete_dir(self.path)
        except FileNotFoundError:
            pass
        except OSError as e:
            if self.exists():
                raise self.error("delete", e) from None


def _s3(settings: Mapping[str, str]) -> tuple[pafs.S3FileSystem, str | None]:
    endpoint = (settings.get("s3.endpoint") or "").strip() or None
    kwargs: dict[str, object] = {
        "connect_timeout": CONNECT_TIMEOUT_S,
        "request_timeout": REQUEST_TIMEOUT_S,
        "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=MAX_ATTEMPTS),
        # region lookups through instance metadata can stall off EC2: a region is always given
        "region": (settings.get("s3.region") or os.environ.get("AWS_REGION")
                   or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"),
        # Flink's s3.path.style.access (default false): virtual-hosted addressing unless asked
        "force_virtual_addressing": (settings.get("s3.path.style.access") or "false").strip().lower() != "true",
    }
    if endpoint is not None:
        scheme = scheme_of(endpoint)
        kwargs["scheme"] = scheme or "https"
        kwargs["endpoint_override"] = endpoint.split("://", 1)[1] if scheme else endpoint
    access, secret = settings.get("s3.access-key"), settings.get("s3.secret-key")
    if (access is None) != (secret is None):
        raise StorageError("'s3.access-key' and 's3.secret-key' must be set together")
    if access is not None:
        kwargs["access_key"], kwargs["secret_key"] = access, secret
    return pafs.S3FileSystem(**kwargs), endpoint


def resolve(path: str | os.PathLike[str], settings: Mapping[str, str] | None = None) -> Location:
    """The file system and path ``path`` names; S3 configured by the ``s3.*`` keys of ``settings``."""
    text = str(path)
    check_path(text)
    scheme = scheme_of(text)
    if scheme is None or scheme == "file":
        local = os.path.abspath(text.removeprefix("file://") if scheme else text)
        return Location(pafs.LocalFileSystem(), local, local)
    rest = text.split("://", 1)[1].rstrip("/")
    if scheme in S3_SCHEMES:
        if not rest or rest.startswith("/"):
            raise StorageError(f"path '{text}' names no bucket (expected {scheme}://bucket/key)")
        fs, endpoint = _s3(settings or {})
        return Location(fs, rest, text.rstrip("/"), endpoint)
    try:
        fs, inner = pafs.FileSystem.from_uri(text)
    except (OSError, ValueError) as e:
        raise StorageError(f"cannot open the file system of '{text}': {str(e).strip().splitlines()[0]}") from None
    return Location(fs, inner.rstrip("/"), text.rstrip("/"))
