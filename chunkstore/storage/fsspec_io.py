"""Concurrent requests on an async fsspec filesystem's event loop, for FSStore.

Every key is one request (a GET is ``_cat_file`` without a size lookup, a PUT ``_pipe_file``),
all of a batch in flight at once up to ``config.get("io_concurrency")``; each key has its
own ``concurrent.futures.Future``, so a caller can start decoding the first chunks while the
last are still on the wire. Throttling, 5xx answers, timeouts and dropped connections are
retried with exponential backoff (``config.get("io_retries")`` times) on top of whatever the
filesystem retries itself; they are never reported as a missing key.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import random
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from chunkstore import config
from chunkstore.storage import protocol
from chunkstore.errors import NoSuchBucketError, store_name

#: HTTP statuses and S3 error codes that mean "try again later"
_TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_TRANSIENT_CODES = frozenset({
    "SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "InternalError",
    "ServiceUnavailable", "RequestTimeout", "RequestTimeTooSkewed", "503", "500",
})
#: obstore's errors carry the HTTP status, or the failure of the connection, in their text
_OBSTORE_STATUS = re.compile(r"status code: (\d{3})")
_OBSTORE_TRANSIENT = re.compile(r"timed out|timeout|error sending request|connection|"
                                r"body from response|IncompleteMessage", re.IGNORECASE)
_OBSTORE_TIMEOUT = re.compile(r"timed ?out|kind: Timeout", re.IGNORECASE)
#: first backoff pause, seconds; doubled each attempt (with jitter), at most _BACKOFF_MAX
_BACKOFF_FIRST = 0.05
_BACKOFF_MAX = 5.0

_T = TypeVar("_T")


def is_transient(exc: BaseException) -> bool:
    """Whether exc (or an error it was raised from) is worth retrying."""
    seen = 0
    e: BaseException | None = exc
    while e is not None and seen < 8:
        if isinstance(e, (FileNotFoundError, PermissionError, IsADirectoryError,
                          NotADirectoryError, ValueError, KeyError)):
            return False
        if isinstance(e, (TimeoutError, asyncio.TimeoutError, ConnectionError)):
            return True
        status = getattr(e, "status", None) or getattr(e, "status_code", None)
        if isinstance(status, int) and status in _TRANSIENT_STATUS:
            return True
        response = getattr(e, "response", None)
        if isinstance(response, dict):  # botocore ClientError
            meta = response.get("ResponseMetadata") or {}
            code = (response.get("Error") or {}).get("Code")
            if meta.get("HTTPStatusCode") in _TRANSIENT_STATUS or code in _TRANSIENT_CODES:
                return True
        if type(e).__module__.startswith("obstore"):  # obstore: the status is in the message
            if type(e).__name__ in ("PermissionDeniedError", "UnauthenticatedError",
                                    "NotFoundError", "PreconditionError"):
                return False
            m = _OBSTORE_STATUS.search(str(e))
            if m is not None:
                return int(m.group(1)) in _TRANSIENT_STATUS
            return bool(_OBSTORE_TRANSIENT.search(str(e)))
        names = {c.__name__ for c in inspect.getmro(type(e))}  # aiohttp's errors by their bases
        if names & {"ClientSSLError", "ClientConnectorCertificateError"}:
            return False  # a certificate does not get better by asking again
        if names & {"ServerDisconnectedError", "ClientConnectionError", "ClientOSError",
                    "ClientPayloadError", "ServerTimeoutError", "ConnectTimeoutError",
                    "ReadTimeoutError", "EndpointConnectionError", "IncompleteRead",
                    "ConnectionClosedError", "ResponseStreamingError"}:
            return True
        e = e.__cause__ or e.__context__
        seen += 1
    return False


def with_key(exc: BaseException, key: str, store: object, *,
             what: str | None = None) -> BaseException:
    """exc, of the same type, with a message naming the key (or ``what`` the request did:
    "listing 'a/'") and the store; an error whose type cannot be rebuilt that way (a client
    library's own) becomes an OSError (a TimeoutError for timeouts) caused by it."""
    text = str(exc).split("\n\nDebug source:")[0]  # obstore appends a Rust debug dump
    msg = f"{what or repr(key)} in {store_name(store)}: {text}"
    name = type(exc).__name__
    new: BaseException
    try:
        if name in ("PermissionDeniedError", "UnauthenticatedError") or (
                name == "GenericError" and "status code: 403 Forbidden" in text):
            # obstore's 403/401 (a listing's 403 comes as a GenericError)
            new = PermissionError(msg)
        elif isinstance(exc, OSError) and exc.errno is not None:
            new = type(exc)(exc.errno, msg)
        elif isinstance(exc, (OSError, ValueError, TypeError, RuntimeError)):
            new = type(exc)(msg)
        else:
            raise TypeError
    except Exception:
        timeout = "Timeout" in name or isinstance(exc, asyncio.TimeoutError) or (
            name == "GenericError" and bool(_OBSTORE_TIMEOUT.search(str(exc))))
        new = (TimeoutError if timeout else OSError)(
            f"{what or repr(key)} in {store_name(store)}: {name}: {text}")
    new.__cause__ = exc
    return new


def cat_kwargs(fs: Any) -> dict:
    """Keyword arguments that make ``fs._cat_file(path)`` one GET: s3fs otherwise sends a
    HEAD first, to split large objects into concurrent ranged reads."""
    try:
        params = inspect.signature(fs._cat_file).parameters
    except (TypeError, ValueError):  # pragma: no cover
        return {}
    return {"max_concurrency": 1} if "max_concurrency" in params else {}


async def _retrying(make: Callable[[], Awaitable[_T]], retries: int) -> _T:
    attempt = 0
    while True:
        try:
            return await make()
        except Exception as e:
            if attempt >= retries or not is_transient(e):
                raise
        await asyncio.sleep(_backoff(attempt))
        attempt += 1


def _backoff(attempt: int) -> float:
    """The pause before retry number attempt + 1: doubled each time, at most _BACKOFF_MAX,
    with jitter."""
    return min(_BACKOFF_MAX, _BACKOFF_FIRST * 2 ** attempt) * (0.5 + random.random())


def retrying_sync(call: Callable[[], _T], retries: int | None = None) -> _T:
    """call() on this thread, retried as _retrying retries a request (transient errors only,
    with backoff): for requests made through a filesystem's blocking methods (deletes)."""
    if retries is None:
        retries = config.get("io_retries")
    attempt = 0
    while True:
        try:
            return call()
        except Exception as e:
            if attempt >= retries or not is_transient(e):
                raise
        time.sleep(_backoff(attempt))
        attempt += 1


def _settle(fut: concurrent.futures.Future, value: Any = None,
            exc: BaseException | None = None) -> None:
    try:
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(value)
    except concurrent.futures.InvalidStateError:  # cancelled by the waiting thread
        pass


def result(fut: concurrent.futures.Future) -> Any:
    """A batch future's result. A batch sent to an event loop that is not the store's own
    (an asynchronous caller's: protocol.CALLER_LOOP) may never run if that loop stops first
    (asyncio.run ending with the read abandoned): waiting then raises RuntimeError instead of
    holding the waiting worker thread for ever."""
    loop = getattr(fut, "chunkstore_loop", None)
    if loop is None:
        return fut.result()
    while True:
        try:
            return fut.result(timeout=_LOOP_CHECK_S)
        except concurrent.futures.TimeoutError:
            if not loop.is_running():
                fut.cancel()
                raise RuntimeError("the event loop awaiting this read stopped before its "
                                   "requests were answered") from None


#: how often a wait for a caller's loop checks that the loop still runs
_LOOP_CHECK_S = 0.5



def no_such_bucket(exc: BaseException) -> bool:
    """Whether a "not found" error of an object store says its bucket is missing, not the
    key: S3's NoSuchBucket (in obstore's message, as the XML code; behind s3fs's
    FileNotFoundError, as the botocore error that caused it)."""
    e: BaseException | None = exc
    for _ in range(8):  # (a cause chain is short; a cycle is not followed forever)
        if e is None:
            return False
        if "<Code>NoSuchBucket</Code>" in str(e) or type(e).__name__ == "NoSuchBucket":
            return True
        response = getattr(e, "response", None)
        if isinstance(response, dict) and isinstance(response.get("Error"), dict) \
                and response["Error"].get("Code") == "NoSuchBucket":
            return True
        e = e.__cause__ or e.__context__
    return False


def raise_if_no_bucket(exc: BaseException, where: object) -> None:
    """Raise NoSuchBucketError naming the store where exc says its bucket is missing (a
    missing bucket read as missing keys gives fill values, or "no array here")."""
    if no_such_bucket(exc):
        raise NoSuchBucketError(
            f"the bucket of {store_name(where)} does not exist (S3 answered NoSuchBucket); "
            f"check the URL and the endpoint") from None


class Batch:
    """Requests of one batch in flight on the loop; ``futures[i]`` answers ``calls[i]``
    (wait with :func:`result`).

    A call returning ``missing`` (when its error is one of *missing*) resolves to None."""

    def __init__(self, fs: Any, calls: Sequence[Callable],
                 missing: tuple[type[BaseException], ...]) -> None:
        self.futures: list[concurrent.futures.Future] = [
            concurrent.futures.Future() for _ in calls]
        loop = fs.loop
        if loop is protocol.caller_loop():   # an asynchronous caller's loop (see result)
            for f in self.futures:
                f.chunkstore_loop = loop  # type: ignore[attr-defined]
        self._loop = loop
        self._coro = self._run(list(calls), missing, config.get("io_concurrency"),
                               config.get("io_retries"))
        self._task = asyncio.run_coroutine_threadsafe(self._coro, loop)

    async def _run(self, calls: list[Callable], missing: tuple[type[BaseException], ...],
                   limit: int, retries: int) -> None:
        futures = self.futures
        try:
            sem = asyncio.Semaphore(limit)
        except BaseException as e:  # noqa: BLE001 - every waiter gets the error, none hangs
            for f in futures:
                _settle(f, exc=e)
            raise

        async def one(i: int) -> None:
            fut = futures[i]
            try:
                async with sem:
                    if fut.cancelled():
                        return
                    value = await _retrying(calls[i], retries)
            except missing as e:
                if no_such_bucket(e):  # (not a missing key: the waiting thread raises it)
                    _settle(fut, exc=e)
                    return
                value = None
            except asyncio.CancelledError:
                fut.cancel()
                raise
            except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
                _settle(fut, exc=e)
                return
            _settle(fut, value)

        try:
            await asyncio.gather(*(one(i) for i in range(len(calls))))
        finally:
            for f in futures:
                f.cancel()  # no-op on finished ones: nobody waits forever

    def cancel(self) -> None:
        """Stop the requests not yet answered (their futures are cancelled). Where the loop
        is closed (an asynchronous caller's, asyncio.run ended with the read abandoned) the
        batch never ran: its coroutine is closed, not cancelled through the loop (that
        logged "Event loop is closed" tracebacks, and "never awaited" warnings)."""
        if self._loop.is_closed():
            self._coro.close()
        else:
            self._task.cancel()
        for f in self.futures:
            f.cancel()


async def http_range(fs: Any, url: str, start: int | None, end: int | None) -> bytes:
    """Bytes [start, end) of url through fsspec's HTTPFileSystem, as its _cat_file gets them,
    and as asked where the server ignores the Range header: it answers 200 with the whole
    object (Python's http.server, many static servers), which _cat_file handed on as the
    range (every range read as the whole value). No request more: the answer's status
    tells."""
    if start == end:
        return b""
    kw = fs.kwargs.copy()
    headers = kw.pop("headers", {}).copy()
    headers["Range"] = await fs._process_limits(url, start, end)
    kw["headers"] = headers
    session = await fs.set_session()
    async with session.get(fs.encode_url(url), **kw) as r:
        out = await r.read()
        fs._raise_not_found_for_status(r, url)
        whole = r.status == 200
    return out[start:end] if whole else out
