"""FSStore's direct S3 path (chunkstore.storage.s3_direct): GETs and PUTs signed here and
sent over aiohttp, with s3fs behind it for everything else.

Signatures are checked two ways: against botocore's own signer (byte-identical
Authorization headers), and by the test server with authentication switched on, which
verifies every signature of a real IAM user's requests."""

from __future__ import annotations

import datetime
import json
import pickle
import time
import urllib.parse
import uuid

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.storage import FSStore, s3_direct
from faults import relay, serving

pytest.importorskip("s3fs")
pytest.importorskip("moto")

KEYS = ["plain/0.0", "sp ace/é+x=1&y", "tilde~/a-b_c.d", "q?uery#frag", "pct%20/x"]


# ---------------------------------------------------------------------- the signer
@pytest.mark.parametrize("method, body, token", [
    ("GET", b"", None), ("PUT", b"payload " * 100, None), ("GET", b"", "session/token+=="),
    ("PUT", b"", "tok")])
@pytest.mark.parametrize("key", KEYS)
def test_signature_matches_botocore(monkeypatch, method, body, token, key):
    import hashlib

    import botocore.auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    when = datetime.datetime(2026, 11, 24, 3, 4, 5, tzinfo=datetime.timezone.utc)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: when)
    uri = "/my-bucket/" + urllib.parse.quote(key, safe="/~")
    req = AWSRequest(method=method, url="http://127.0.0.1:9000" + uri, data=body)
    botocore.auth.S3SigV4Auth(Credentials("AKID", "SECRET/key+", token), "s3",
                              "eu-west-3").add_auth(req)
    ours = s3_direct.sign({"host": "127.0.0.1:9000"}, method, uri,
                          hashlib.sha256(body).hexdigest(), "AKID", "SECRET/key+", token,
                          "eu-west-3", "s3", when.timetuple(), {})
    assert ours["Authorization"] == req.headers["Authorization"]
    assert ours["x-amz-date"] == req.headers["X-Amz-Date"]
    if token:
        assert ours["x-amz-security-token"] == token


def test_signing_keys_are_cached_per_day():
    cache = {}
    args = ("GET", "/b/k", s3_direct._EMPTY_SHA256, "A", "S", None, "us-east-1", "s3")
    s3_direct.sign({"host": "h"}, *args, time.gmtime(0), cache)
    s3_direct.sign({"host": "h"}, *args, time.gmtime(3600), cache)
    assert len(cache) == 1
    s3_direct.sign({"host": "h"}, *args, time.gmtime(86400), cache)
    assert len(cache) == 2


@pytest.mark.parametrize("start, end, header", [
    (None, None, None), (0, None, "bytes=0-"), (5, None, "bytes=5-"),
    (-7, None, "bytes=-7"), (3, 10, "bytes=3-9"), (None, 4, "bytes=0-3"),
    (-7, 10, False), (5, 5, False), (5, 2, False)])
def test_range_headers(start, end, header):
    assert s3_direct._range(start, end) == header


# ---------------------------------------------------------------------- against the server
def _opts(s3_server, **extra):
    return {**s3_server.storage_options, "skip_instance_cache": True, **extra}


def test_reads_and_writes_go_direct(s3_server):
    store = FSStore(s3_server.url(), storage_options=_opts(s3_server))
    assert store._direct is not None
    for i, key in enumerate(KEYS):
        store[key] = f"value {i}".encode()
    assert [store[k] for k in KEYS] == [f"value {i}".encode() for i in range(len(KEYS))]
    bucket = store._direct._buckets[s3_server.bucket]
    assert bucket.use and bucket.prefix == "/" + s3_server.bucket
    # what s3fs sees is what we wrote (same object names)
    plain = FSStore(store.url, storage_options=_opts(s3_server), s3_direct=False)
    assert plain._direct is None
    assert plain.getitems(KEYS) == store.getitems(KEYS)
    assert sorted(plain) == sorted(KEYS)
    assert store.get_partial(KEYS[1], [(0, 5), (-1, None), (6, None), (100, 1)]) == [
        b"value", b"1", b"1", b""]
    with pytest.raises(KeyError):
        store["absent/key"]
    assert store.getitems(["absent", KEYS[0]]) == {KEYS[0]: b"value 0"}


def test_array_round_trip_direct_and_through_s3fs(s3_server):
    url = s3_server.url()
    data = np.arange(60 * 70, dtype="f8").reshape(60, 70)
    z = cs.open_array(FSStore(url, storage_options=_opts(s3_server)), mode="w",
                      shape=data.shape, chunks=(16, 16), dtype="f8")
    z[...] = data
    z[3:40, 5:9] = -1
    data[3:40, 5:9] = -1
    for direct in (True, False):
        r = cs.open_array(FSStore(url, storage_options=_opts(s3_server), s3_direct=direct),
                          mode="r")
        np.testing.assert_array_equal(r[...], data)


def test_pickle_keeps_the_choice(s3_server):
    store = FSStore(s3_server.url(), storage_options=_opts(s3_server), s3_direct=False)
    again = pickle.loads(pickle.dumps(store))
    assert again.s3_direct is False and again._direct is None
    assert pickle.loads(pickle.dumps(FSStore(store.url, storage_options=_opts(
        s3_server))))._direct is not None


@pytest.mark.parametrize("extra", [
    {"requester_pays": True},
    {"s3_additional_kwargs": {"ServerSideEncryption": "AES256"}},
    {"version_aware": True},
    {"client_kwargs": {"verify": False}},
    {"config_kwargs": {"proxies": {"http": "http://127.0.0.1:1"}}},
])
def test_settings_we_do_not_reproduce_use_s3fs(s3_server, extra):
    opts = _opts(s3_server)
    for name, value in extra.items():
        if isinstance(value, dict) and name in opts:
            value = {**opts[name], **value}
        opts[name] = value
    store = FSStore(s3_server.url(), storage_options=opts)
    assert store._direct is None


def test_one_client_per_filesystem(s3_server):
    a = FSStore(s3_server.url(), storage_options=s3_server.storage_options)
    b = FSStore(s3_server.url(), storage_options=s3_server.storage_options)
    assert a.fs is b.fs and a._direct is b._direct


@pytest.fixture
def iam_user(s3_server):
    """(access key, secret) of an IAM user allowed everything on S3, with the server's
    authentication switched on: every request's signature is verified."""
    import boto3

    iam = boto3.client("iam", endpoint_url=s3_server.endpoint, region_name="us-east-1",
                       aws_access_key_id="testing", aws_secret_access_key="testing")
    name = "u" + uuid.uuid4().hex[:8]
    iam.create_user(UserName=name)
    iam.put_user_policy(UserName=name, PolicyName="all", PolicyDocument=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    s3_server.set_auth(True)
    try:
        yield key["AccessKeyId"], key["SecretAccessKey"]
    finally:
        s3_server.set_auth(False)


def _signed_opts(s3_server, key, secret):
    return _opts(s3_server, key=key, secret=secret,
                 config_kwargs={"retries": {"max_attempts": 1}})


def test_the_server_accepts_our_signatures(s3_server, iam_user):
    store = FSStore(s3_server.url(), storage_options=_signed_opts(s3_server, *iam_user))
    for key in KEYS:
        store[key] = key.encode()  # PUT over http: the payload's SHA-256 is signed
    assert store.getitems(KEYS) == {k: k.encode() for k in KEYS}
    assert store.get_partial(KEYS[1], [(1, 3)]) == [KEYS[1].encode()[1:4]]
    assert store._direct._buckets[s3_server.bucket].use  # never handed to s3fs
    data = np.arange(1000, dtype="i2")
    z = cs.open_array(store, mode="w", path="arr", shape=(1000,), chunks=(128,), dtype="i2")
    z[...] = data
    np.testing.assert_array_equal(cs.open_array(store, mode="r", path="arr")[...], data)


def test_a_signature_refused_is_an_error_naming_the_key(s3_server, iam_user):
    """A refused signature (403 SignatureDoesNotMatch) is not an answer the direct path
    takes as final: the request is made again through s3fs, whose PermissionError (the
    secret is wrong there too) is raised naming the key; nothing is read as missing."""
    good = FSStore(s3_server.url(), storage_options=_signed_opts(s3_server, *iam_user))
    good["a/0"] = b"zero"
    bad = FSStore(good.url, storage_options=_signed_opts(s3_server, iam_user[0], "wrong"))
    with pytest.raises(PermissionError, match="a/0"):
        bad["a/0"]
    with pytest.raises(PermissionError, match="a/0"):
        bad["a/0"] = b"other"
    assert good["a/0"] == b"zero"


def test_an_answer_we_do_not_handle_goes_to_s3fs(monkeypatch, s3_server):
    """An answer the direct path does not handle (here a 404 NoSuchBucket, from a bucket
    address gone wrong) is asked again through s3fs; once s3fs succeeds, it takes over the
    bucket."""
    store = FSStore(s3_server.url(), storage_options=_opts(s3_server))
    store["k"] = b"v"
    bucket = store._direct._buckets[s3_server.bucket]
    seen = []
    orig = s3_direct.S3Direct._raise_final

    def spy(status, code, path):
        seen.append((status, code))
        return orig(status, code, path)

    monkeypatch.setattr(s3_direct.S3Direct, "_raise_final", staticmethod(spy))
    monkeypatch.setattr(bucket, "prefix", "/no-such-bucket-here")
    assert store["k"] == b"v"
    assert seen == [(404, "NoSuchBucket")] and not bucket.use
    assert store["k"] == b"v" and len(seen) == 1  # s3fs from now on


def test_credentials_set_anew_on_the_filesystem_are_used(s3_server, iam_user):
    """s3fs makes a new client when its session is set anew (``connect(refresh=True)``, as
    its docs advise after new credentials): the direct path signs with that client's
    credentials, not those of the client it first resolved the bucket with."""
    import boto3

    good = FSStore(s3_server.url(), storage_options=_signed_opts(s3_server, *iam_user))
    good["k"] = b"v"
    iam = boto3.client("iam", endpoint_url=s3_server.endpoint, region_name="us-east-1",
                       aws_access_key_id="testing", aws_secret_access_key="testing")
    name = "n" + uuid.uuid4().hex[:8]
    s3_server.set_auth(False)
    iam.create_user(UserName=name)  # no policy: every S3 request is denied
    denied = iam.create_access_key(UserName=name)["AccessKey"]
    s3_server.set_auth(True)
    for direct in (True, False):
        store = FSStore(good.url, s3_direct=direct, storage_options=_signed_opts(
            s3_server, denied["AccessKeyId"], denied["SecretAccessKey"]))
        with pytest.raises(PermissionError):
            store["k"]
        store.fs.key, store.fs.secret = iam_user
        store.fs.connect(refresh=True)
        assert store["k"] == b"v"
        store["k"] = b"v"
        if direct:
            assert store._direct._buckets[s3_server.bucket].use


@pytest.mark.parametrize("where", ["config file", "REQUESTS_CA_BUNDLE"])
def test_tls_trusts_the_certificates_botocore_does(s3_server, tmp_path, monkeypatch, where):
    """The direct path verifies TLS against the CA bundle the s3fs client uses, wherever
    botocore found it (AWS_CA_BUNDLE, ``ca_bundle`` in the AWS config file,
    REQUESTS_CA_BUNDLE), not certifi's alone."""
    import certifi

    pem = open(certifi.where()).read()
    one = pem[pem.index("-----BEGIN CERTIFICATE-----"):
              pem.index("-----END CERTIFICATE-----") + len("-----END CERTIFICATE-----")]
    bundle = tmp_path / "ca.pem"
    bundle.write_text(one + "\n")
    monkeypatch.delenv("AWS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    if where == "config file":
        cfg = tmp_path / "config"
        cfg.write_text(f"[default]\nca_bundle = {bundle}\n")
        monkeypatch.setenv("AWS_CONFIG_FILE", str(cfg))
    else:
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(bundle))
    store = FSStore(s3_server.url(), storage_options=_opts(s3_server))
    store["k"] = b"v"
    assert store._direct._buckets[s3_server.bucket].client._endpoint.http_session._verify \
        == str(bundle)
    ctx = store._direct._ssl_for(store._direct._buckets[s3_server.bucket])
    assert len(ctx.get_ca_certs()) == 1


def test_the_environment_proxy_is_used_as_botocore_uses_it(s3_server, monkeypatch):
    """A proxy set in the environment without a scheme (``HTTP_PROXY=host:port``) is taken
    as botocore takes it (``http://host:port``), not handed to aiohttp as an invalid URL."""
    import http.server


    seen = []

    class Forward(http.server.BaseHTTPRequestHandler):
        def _forward(self):
            url = urllib.parse.urlsplit(self.path)  # absolute form, as sent to a proxy
            seen.append((self.command, url.path))
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else None
            status, headers, data = relay(
                self.command, url.hostname, url.port,
                url.path + (f"?{url.query}" if url.query else ""), body,
                dict(self.headers.items()))
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = _forward

        def log_message(self, *args):
            pass

    with serving(Forward) as port:
        for name in ("http_proxy", "HTTP_PROXY"):
            monkeypatch.setenv(name, f"127.0.0.1:{port}")
        for name in ("no_proxy", "NO_PROXY"):
            monkeypatch.delenv(name, raising=False)
        store = FSStore(s3_server.url(), storage_options=_opts(s3_server))
        store["k"] = b"v"
        assert store["k"] == b"v"
        assert store._direct._buckets[s3_server.bucket].use
        assert [m for m, p in seen if p.endswith("/k")] == ["PUT", "GET"]


def test_a_suffix_range_of_an_empty_object_keeps_the_direct_path(s3_server):
    """The server answers a suffix range of an empty object with 200 and the (empty) whole:
    that is the answer, not one for s3fs (which then took over the bucket for good)."""
    store = FSStore(s3_server.url(), storage_options=_opts(s3_server))
    store["empty"] = b""
    store["x"] = b"abcdef"
    assert store.get_partial("empty", [(-4, None)]) == [b""]
    assert store.get_partial("x", [(-4, None), (0, None)]) == [b"cdef", b"abcdef"]
    assert store._direct._buckets[s3_server.bucket].use


def test_directory_buckets_and_arns_use_s3fs(s3_server):
    """S3 Express directory buckets (signed with session auth) and access-point ARNs are
    left to s3fs's client."""
    from fsspec.asyn import sync

    store = FSStore(s3_server.url(), storage_options=_opts(s3_server))
    for bucket in ("data--usw2-az1--x-s3", "arn:aws:s3:us-east-1:123456789012:accesspoint"):
        assert not sync(store.fs.loop, store._direct._resolve, bucket).use


def test_a_failed_bucket_resolution_is_tried_again(s3_server, monkeypatch):
    store = FSStore(s3_server.url(), storage_options=_opts(s3_server))
    real = s3_direct.S3Direct._resolve
    calls = []

    async def flaky(self, bucket):
        calls.append(bucket)
        if len(calls) == 1:
            raise OSError("transient trouble finding the bucket")
        return await real(self, bucket)

    monkeypatch.setattr(s3_direct.S3Direct, "_resolve", flaky)
    store["k"] = b"v"  # through s3fs this once
    assert s3_server.bucket not in store._direct._buckets
    assert store["k"] == b"v"
    assert len(calls) == 2 and store._direct._buckets[s3_server.bucket].use


def test_a_forked_child_leaves_the_parents_connections_alone(s3_server):
    store = FSStore(s3_server.url(), storage_options=_opts(s3_server))
    store["k"] = b"v"
    session = store._direct._session
    s3_direct._close(session, store._direct._session_key[1], pid=-1)  # "another process"
    assert not session.closed
    assert store["k"] == b"v"


@pytest.mark.parametrize("direct", [True, False])
def test_ranges_of_an_empty_object(s3_server, direct):
    """S3 refuses a range of an empty object (416), even one from 0: read as empty."""
    store = FSStore(s3_server.url(), storage_options=_opts(s3_server), s3_direct=direct)
    store["empty"] = b""
    for ranges in ([(0, None)], [(0, 2)], [(-4, None)], [(0, None), (0, 2), (-4, None), (3, 1)]):
        assert store.get_partial("empty", ranges) == [b""] * len(ranges)
    assert store["empty"] == b""


def test_anonymous_access_sends_unsigned_requests(s3_server, monkeypatch):
    """anon=True (botocore's UNSIGNED): requests go without an Authorization header."""
    import boto3

    writer = FSStore(s3_server.url(), storage_options=_opts(s3_server))
    key = writer.root.split("/", 1)[1] + "/pub/0"
    boto3.client("s3", endpoint_url=s3_server.endpoint, region_name="us-east-1",
                 aws_access_key_id="testing", aws_secret_access_key="testing").put_object(
        Bucket=s3_server.bucket, Key=key, Body=b"public", ACL="public-read")
    opts = {"anon": True, "skip_instance_cache": True,
            "client_kwargs": dict(s3_server.storage_options["client_kwargs"])}
    store = FSStore(writer.url, storage_options=opts, mode="r")
    signed = []
    real = s3_direct.sign
    monkeypatch.setattr(s3_direct, "sign", lambda *a, **k: signed.append(1) or real(*a, **k))
    assert store["pub/0"] == b"public"
    bucket = store._direct._buckets[s3_server.bucket]
    assert bucket.use and bucket.unsigned and not signed
