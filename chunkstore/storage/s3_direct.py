"""S3 GETs and PUTs of FSStore sent straight over aiohttp and signed here (AWS Signature
Version 4), instead of through s3fs's aiobotocore client.

Why: a GET through aiobotocore costs about 1.4 ms of client CPU (request built from the
service model, signing, user agent, checksum handling, response parsing); the same GET
signed here costs about 0.45 ms. A 64-chunk read puts 64 of them on one event loop, so that
CPU is on the critical path: it was what kept FSStore behind tensorstore at cloud latency
(README, "S3 at cloud latency"). Measured by ``asv_bench/s3_latency.py``.

What stays with s3fs: credentials (asked of its client on every request, so refreshed ones
are used), where a bucket lives (one URL presigned by its client per bucket gives the
scheme, host and path style), listings, deletes, multipart uploads, and
every answer this module does not handle itself. Handled here:

- 200 (206 for a range): the bytes; a PUT of up to 100 MiB (s3fs's single-PUT size): done.
- 404 ``NoSuchKey``: FileNotFoundError (a missing key).
- 403 ``AccessDenied``: PermissionError naming the object, as s3fs raises.
- 408, 429, 5xx and connection errors or timeouts: raised as retryable errors, so the
  caller's backoff (``config.get("io_retries")``, fsspec_io) retries them; never missing.
- anything else (a redirect to another region, a 400, a 403 for a skewed clock or a bad
  signature, ``NoSuchBucket``): the same request is made again through s3fs, which raises
  its own error or succeeds; if it succeeds, that bucket's requests go through s3fs from
  then on.

Used only where we reproduce what the client would send: an ``s3fs.S3FileSystem`` without
requester-pays, extra request parameters (SSE, ACLs), version-aware paths, custom TLS
verification or proxies in its botocore config (see :func:`for_fs`); ``FSStore(...,
s3_direct=False)`` turns it off. Response checksums are not validated (TLS and TCP check the
transfer, as for tensorstore).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import time
import urllib.request
import weakref
from typing import Any
from urllib.parse import quote, urlsplit

from . import fsspec_io

#: statuses retried by the caller's backoff (fsspec_io.is_transient reads ``status``)
_RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
#: s3fs's largest single PUT (2 x its 50 MiB part size); larger values go through s3fs
_MAX_PUT = 100 * 2**20
_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
#: client settings (s3fs client_kwargs / config_kwargs) that the presigned URL reflects or
#: that we apply ourselves; any other one makes the store use s3fs for every request
_CLIENT_KW = frozenset({"endpoint_url", "region_name", "use_ssl"})
_CONFIG_KW = frozenset({"max_pool_connections", "connect_timeout", "read_timeout", "retries",
                        "region_name", "signature_version", "s3", "user_agent_extra",
                        "user_agent", "tcp_keepalive", "request_checksum_calculation",
                        "response_checksum_validation"})


class S3ResponseError(OSError):
    """An S3 answer with an error status; ``status`` is the HTTP status."""

    status: int | None = None


def _eligible(fs) -> bool:
    try:
        import s3fs
    except ImportError:  # pragma: no cover - FSStore over S3 needs s3fs anyway
        return False
    if not isinstance(fs, s3fs.S3FileSystem):
        return False
    return (not getattr(fs, "version_aware", False)
            and not getattr(fs, "req_kw", None)
            and not getattr(fs, "s3_additional_kwargs", None)
            and set(getattr(fs, "client_kwargs", None) or {}) <= _CLIENT_KW
            and set(getattr(fs, "config_kwargs", None) or {}) <= _CONFIG_KW)


_by_fs: dict[int, S3Direct] = {}


def for_fs(fs) -> S3Direct | None:
    """The direct client of the s3fs filesystem fs (one per filesystem object, so its
    connections are reused by every store on it), or None if fs is not one we can
    reproduce requests of."""
    if not _eligible(fs):
        return None
    direct = _by_fs.get(id(fs))
    if direct is None or direct.fs is not fs:
        direct = _by_fs[id(fs)] = S3Direct(fs)
        weakref.finalize(fs, _by_fs.pop, id(fs), None)  # and with it the connections
    return direct


class _Bucket:
    """How to address and sign for one bucket: base URL, Host header, path prefix."""

    __slots__ = ("client", "scheme", "host", "prefix", "region", "service", "unsigned",
                 "proxy", "ssl", "use", "owner")

    # set by S3Direct._resolve once the bucket can be served directly (use = True)
    client: Any
    scheme: str
    host: str
    prefix: str
    region: str
    service: str
    unsigned: bool
    proxy: str | None
    ssl: Any  # an ssl.SSLContext, or True for plain http
    use: bool
    owner: Any

    def __init__(self) -> None:
        self.use = False  # False: every request of this bucket goes through s3fs
        self.owner = None  # s3fs's client (fs._s3) when this was resolved


class S3Direct:
    """GET and PUT of S3 objects for FSStore; see the module docstring."""

    def __init__(self, fs):
        self._fs = weakref.ref(fs)  # the stores hold the filesystem; we must not
        self._cat_kw = fsspec_io.cat_kwargs(fs)  # one GET, no HEAD, when s3fs answers
        self._buckets: dict[str, _Bucket] = {}
        self._resolving: dict[str, asyncio.Future[_Bucket]] = {}
        self._session = None
        self._session_key = None  # (pid, loop) the session belongs to
        self._keys: dict[tuple, bytes] = {}  # (secret, day, region, service) -> signing key
        self._ssl: dict = {}  # CA bundle -> TLS context

    @property
    def fs(self):
        """The s3fs filesystem this serves (None once it has been garbage collected)."""
        return self._fs()

    # -- set-up ----------------------------------------------------------------------------

    async def _bucket(self, bucket: str) -> _Bucket:
        b = self._buckets.get(bucket)
        # s3fs makes a new client when its session is set anew (new credentials, a closed
        # session): resolve again, with that client's credentials
        if b is not None and (not b.use or b.owner is getattr(self.fs, "_s3", None)):
            return b
        # the first requests of a batch arrive together: one resolution for all of them
        task = self._resolving.get(bucket)
        if task is None or task.get_loop() is not asyncio.get_running_loop():
            task = self._resolving[bucket] = asyncio.ensure_future(self._resolve(bucket))
        try:
            b = await asyncio.shield(task)
        except Exception:  # noqa: BLE001 - s3fs makes this request, and raises
            return _Bucket()  # (not kept: a later request tries again)
        finally:
            if task.done() and self._resolving.get(bucket) is task:
                del self._resolving[bucket]
        self._buckets[bucket] = b
        return b

    async def _resolve(self, bucket: str) -> _Bucket:
        import botocore

        b = _Bucket()
        if ":" in bucket or bucket.endswith("--x-s3"):
            # access point / outpost ARNs, and S3 Express directory buckets (signed with
            # session auth): s3fs's client knows them
            return b
        await self.fs.set_session()
        b.owner = getattr(self.fs, "_s3", None)
        client = await self.fs.get_s3(bucket)
        cfg = client.meta.config
        b.unsigned = cfg.signature_version is botocore.UNSIGNED
        if not hasattr(getattr(client, "_request_signer", None), "_credentials"):
            return b  # an aiobotocore that keeps its credentials elsewhere
        if not b.unsigned and cfg.signature_version not in (None, "s3v4", "v4"):
            return b
        try:
            url = await client.generate_presigned_url(
                "get_object", Params={"Bucket": bucket, "Key": "k"}, ExpiresIn=60)
        except Exception:  # noqa: BLE001 - then s3fs does it all
            return b
        parts = urlsplit(url)
        if not parts.path.endswith("/k") or parts.scheme not in ("http", "https"):
            return b
        # only the address is taken from the presigned URL (its query may be signed with
        # another scheme); requests are signed for the client's region
        b.region, b.service = client.meta.region_name or "us-east-1", "s3"
        b.client = client
        b.scheme = parts.scheme
        host = parts.netloc
        default = ":443" if parts.scheme == "https" else ":80"
        b.host = host[: -len(default)] if host.endswith(default) else host
        b.prefix = parts.path[:-2]
        # the proxy the client uses (the environment's, looked up when it was made, with a
        # scheme-less "host:port" read as http://, as botocore does); aiohttp's trust_env
        # would read ~/.netrc on every request
        config = _http_setting(client, "_proxy_config")
        if config is not None:
            b.proxy = config.proxy_url_for(url) or None
        else:  # an aiobotocore that keeps it elsewhere
            proxies = urllib.request.getproxies()
            b.proxy = (None if urllib.request.proxy_bypass(parts.hostname or "")
                       else proxies.get(b.scheme))
        b.ssl = self._ssl_for(b) if b.scheme == "https" else True
        b.use = True
        return b

    def _http(self, b: _Bucket):
        """The aiohttp session of this process and event loop (made on first use; no await
        in between, so concurrent first requests share one)."""
        loop = asyncio.get_running_loop()
        key = (os.getpid(), loop)
        if self._session is None or self._session_key != key:
            import aiohttp

            if self._session is not None and self._session_key[0] == key[0]:
                # a new event loop in this process (fsspec's was replaced): the old one
                # no longer runs, so its connections are closed here
                old_loop = self._session_key[1]
                if old_loop.is_closed() or not old_loop.is_running():
                    _close(self._session, old_loop, key[0])

            cfg = b.client.meta.config
            connector = aiohttp.TCPConnector(limit=cfg.max_pool_connections or 10)
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=cfg.connect_timeout,
                                            sock_read=cfg.read_timeout)
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=timeout, auto_decompress=False,
                skip_auto_headers=("Accept-Encoding", "Content-Type"))
            self._session_key = key
            weakref.finalize(self, _close, self._session, loop, key[0])
        return self._session

    def _ssl_for(self, b: _Bucket):
        """The TLS context of an https bucket: the certificates its client verifies with
        (certifi's, or the CA bundle botocore found: AWS_CA_BUNDLE, ca_bundle in the AWS
        config, REQUESTS_CA_BUNDLE); one per bundle (loading one takes milliseconds)."""
        import ssl

        from botocore.httpsession import get_cert_path

        verify = _http_setting(b.client, "_verify")
        if verify is None:  # an aiobotocore that keeps it elsewhere
            verify = os.environ.get("AWS_CA_BUNDLE") or True
        if not verify:
            return False
        ctx = self._ssl.get(verify)
        if ctx is None:
            ctx = self._ssl[verify] = ssl.create_default_context(cafile=get_cert_path(verify))
        return ctx

    # -- signing ---------------------------------------------------------------------------

    async def _headers(self, b: _Bucket, method: str, uri: str,
                       payload_hash: str) -> dict | None:
        """The request's headers, signed with the client's current credentials; None where
        the client has none (s3fs then raises its own "no credentials" error)."""
        headers = {"host": b.host}
        if b.unsigned:
            return headers
        creds = b.client._request_signer._credentials
        if creds is None:
            return None
        creds = await creds.get_frozen_credentials()
        if creds is None or not creds.access_key or creds.secret_key is None:
            return None
        return sign(headers, method, uri, payload_hash, creds.access_key, creds.secret_key,
                    creds.token, b.region, b.service, time.gmtime(), self._keys)

    # -- requests --------------------------------------------------------------------------

    async def _send_get(self, path: str, rng: str | None, extra: dict | None = None):
        """A signed GET of path (Range rng, headers extra): ``(bucket, status, body,
        response headers)``, or ``(bucket, None, ...)`` where the direct path does not serve
        the bucket. Redirects are not followed (as botocore): a 3xx goes back to the caller
        like any answer not handled, never with our Host and token to the host a Location
        names."""
        bucket, key, _ = self.fs.split_path(path)
        b = await self._bucket(bucket)
        if not b.use:
            return b, None, b"", {}
        uri = b.prefix + "/" + quote(key, safe="/~")
        headers = await self._headers(b, "GET", uri, _EMPTY_SHA256)
        if headers is None:
            return b, None, b"", {}
        if rng:
            headers["Range"] = rng
        headers.update(extra or {})
        async with self._http(b).get(_url(b, uri), headers=headers, proxy=b.proxy, ssl=b.ssl,
                                     allow_redirects=False) as resp:
            return b, resp.status, await resp.read(), resp.headers

    def _raise_handled(self, status: int, body: bytes, path: str) -> None:
        """Raise for the answers handled here: missing object, retryable, access denied."""
        code = _code(body)
        if status == 404 and code == "NoSuchKey":
            raise FileNotFoundError(path)
        self._raise_final(status, code, path)

    async def get(self, path: str, start: int | None = None, end: int | None = None):
        """The object's bytes (or bytes [start, end), S3's suffix range for a negative
        start); FileNotFoundError if there is no such object."""
        rng = _range(start, end)
        if rng is not False:
            b, status, body, _ = await self._send_get(path, rng)
            if status == (206 if rng else 200):
                return body
            # a range to the end answered with the whole object (S3 does so for an empty
            # one): that is the answer; not a reason to hand the bucket to s3fs
            if status == 200 and end is None and (start == 0 or (
                    start is not None and start < 0 and len(body) <= -start)):
                return body
            if status is not None:
                self._raise_handled(status, body, path)
        out = await self.fs._cat_file(path, start=start, end=end, **self._cat_kw)
        if rng is not False and status is not None:
            b.use = False  # s3fs knows something we do not (a region, a clock skew)
        return out

    async def get_version(self, path: str, start: int, end: int | None,
                          if_match: str | None = None):
        """One ranged GET of one version of the object: ``(bytes, etag, size)`` of bytes
        [start, end) (the last -start bytes for a negative start and end None), sent with
        If-Match where given (the object is no longer that version: VersionChanged).
        FileNotFoundError if there is no such object; False where the direct path does not
        serve the bucket or the answer (the caller then reads the object whole)."""
        from .base import VersionChanged

        rng = _range(start, end)
        if not rng:
            return False
        _, status, body, headers = await self._send_get(
            path, rng, None if if_match is None else {"If-Match": if_match})
        if status is None:
            return False
        etag = headers.get("ETag")
        if status == 206 and etag:
            total = headers.get("Content-Range", "").rpartition("/")[2]
            return body, etag, int(total) if total.isdigit() else None
        if status == 200 and etag and end is None:
            # the whole object for a range to the end (S3 does so where the range covers it
            # all, an empty object included)
            return (body if start >= 0 else body[max(0, len(body) + start):]), etag, len(body)
        if status == 412:
            raise VersionChanged(f"{path}: not the version {if_match} any more")
        if status == 416:
            return b"", None, None  # past the end: the caller reports the short read
        self._raise_handled(status, body, path)
        return False

    def payload_hash(self, path: str, data: bytes) -> str | None:
        """The SHA-256 that a PUT of data to path signs, where it is known to need one
        (plain http; over https the payload goes unsigned): for the caller to compute in its
        own thread (hashlib releases the GIL), off the event loop."""
        b = self._buckets.get(self.fs.split_path(path)[0])
        if b is None or not b.use or b.scheme != "http" or len(data) >= _MAX_PUT:
            return None
        return hashlib.sha256(data).hexdigest()

    async def put(self, path: str, data: bytes, sha256: str | None = None) -> None:
        """Store data as the object at path (replacing it); *sha256*: payload_hash's."""
        bucket, key, _ = self.fs.split_path(path)
        b = await self._bucket(bucket)
        if not b.use or len(data) >= _MAX_PUT:
            await self.fs._pipe_file(path, data)
            return
        uri = b.prefix + "/" + quote(key, safe="/~")
        # over https the payload goes unsigned (TLS protects it), as botocore does; over
        # plain http it is hashed into the signature
        payload_hash = ("UNSIGNED-PAYLOAD" if b.scheme == "https"
                        else sha256 or hashlib.sha256(data).hexdigest())
        headers = await self._headers(b, "PUT", uri, payload_hash)
        if headers is None:
            await self.fs._pipe_file(path, data)
            return
        session = self._http(b)
        async with session.put(_url(b, uri), data=data, headers=headers, proxy=b.proxy,
                               ssl=b.ssl, allow_redirects=False) as resp:
            status = resp.status
            body = await resp.read()
        if status == 200:
            self.fs.invalidate_cache(path)
            return
        self._raise_final(status, _code(body), path)
        await self.fs._pipe_file(path, data)
        b.use = False

    @staticmethod
    def _raise_final(status: int, code: str | None, path: str) -> None:
        """Raise for the answers we handle ourselves (retryable, access denied)."""
        if status in _RETRY_STATUS:
            err = S3ResponseError(f"{path}: HTTP {status} {code or ''}".rstrip())
            err.status = status
            raise err
        if status == 403 and code == "AccessDenied":
            raise PermissionError(f"{path}: HTTP 403 AccessDenied")


def _http_setting(client, name: str):
    """A setting the botocore client keeps on its http session (``_proxy_config``,
    ``_verify``), or None in an aiobotocore that keeps it elsewhere."""
    return getattr(getattr(getattr(client, "_endpoint", None), "http_session", None), name,
                   None)


def _range(start, end):
    """The Range header of s3fs's ``_cat_file(start=, end=)``: None for the whole object,
    False where only s3fs can place it (it needs the size first)."""
    if end is None:
        if start is None or start == 0:
            return None if start is None else "bytes=0-"
        return f"bytes={start}-" if start > 0 else f"bytes=-{-start}"
    if start is None:
        start = 0
    if start < 0 or end <= start:
        return False
    return f"bytes={start}-{end - 1}"


def _url(b: _Bucket, uri: str):
    import yarl

    return yarl.URL(f"{b.scheme}://{b.host}{uri}", encoded=True)


def _code(body: bytes) -> str | None:
    """The <Code> of an S3 error document."""
    i = body.find(b"<Code>")
    j = body.find(b"</Code>", i)
    return body[i + 6: j].decode("utf-8", "replace") if i >= 0 and j > i else None


def sign(headers: dict, method: str, uri: str, payload_hash: str, access_key: str,
         secret_key: str, token: str | None, region: str, service: str, now,
         cache: dict | None = None) -> dict:
    """headers (lower-case names, with ``host``) plus the SigV4 headers of a request with
    no query string: ``x-amz-date``, ``x-amz-content-sha256``, the session token if any,
    and ``Authorization``. *now* is a ``time.struct_time`` in UTC; *cache* keeps signing
    keys (they change once a day)."""
    amz_date = time.strftime("%Y%m%dT%H%M%SZ", now)
    day = amz_date[:8]
    headers["x-amz-content-sha256"] = payload_hash
    headers["x-amz-date"] = amz_date
    if token:
        headers["x-amz-security-token"] = token
    names = sorted(headers)
    signed = ";".join(names)
    canonical = "\n".join([method, uri, "", *(f"{n}:{str(headers[n]).strip()}" for n in names),
                           "", signed, payload_hash])
    scope = f"{day}/{region}/{service}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    ck = (secret_key, day, region, service)
    key = cache.get(ck) if cache is not None else None
    if key is None:
        key = ("AWS4" + secret_key).encode()
        for part in (day, region, service, "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        if cache is not None:
            if len(cache) > 64:
                cache.clear()
            cache[ck] = key
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, "
                                f"SignedHeaders={signed}, Signature={signature}")
    return headers


def _close(session, loop, pid: int) -> None:
    """Close a session's connections when its owner goes: on its event loop if that still
    runs in another thread, else here (as fsspec closes s3fs's own sessions). Not in a
    forked child: the connections are the parent's (and its loop does not run here)."""
    connector = session.connector
    if os.getpid() != pid or connector is None or connector.closed:
        return
    try:
        here = asyncio.get_running_loop()
    except RuntimeError:
        here = None
    try:
        if here is not loop and loop.is_running() and not loop.is_closed():
            asyncio.run_coroutine_threadsafe(session.close(), loop).result(timeout=2)
        else:
            connector._close()
    except Exception:  # noqa: BLE001 - best effort, as at interpreter exit
        pass
