"""The CLI on S3 (moto): endpoint and credentials through --storage-option, no environment."""

from __future__ import annotations

import numpy as np

import chunkstore as cs
import chunkstore.cli as cli


def options(s3, flag="--storage-option"):
    o = s3.storage_options
    out = []
    for k, v in [("key", o["key"]), ("secret", o["secret"]),
                 ("client_kwargs.endpoint_url", o["client_kwargs"]["endpoint_url"]),
                 ("client_kwargs.region_name", "us-east-1"),
                 ("config_kwargs.retries.max_attempts", "1")]:
        out += [flag, f"{k}={v}"]
    return out


def test_cli_round_trip_through_s3(s3_server, tmp_path, capsys, monkeypatch):
    for var in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(var, raising=False)
    src = tmp_path / "src.zarr"
    data = np.arange(200, dtype="f8").reshape(10, 20)
    cs.array(data, store=str(src), chunks=(5, 5))
    url = s3_server.url()
    assert cli.main(["cp", str(src), url, "--chunks", "5,10", *options(s3_server)]) == 0
    assert cli.main(["info", url, *options(s3_server)]) == 0
    assert "(10, 20)" in capsys.readouterr().out
    back = tmp_path / "back.zarr"
    assert cli.main(["cp", url, str(back), *options(s3_server, "--src-storage-option")]) == 0
    z = cs.open_array(str(back), mode="r")
    assert z.chunks == (5, 10)
    np.testing.assert_array_equal(z[...], data)
    assert cli.main(["verify", url, *options(s3_server)]) == 0
    assert cli.main(["rm", url, "-f", *options(s3_server)]) == 0
    capsys.readouterr()
    # rm removed it: info now fails, with one line.
    assert cli.main(["info", url, *options(s3_server)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("chunkstore: error:") and url in err[0]


def test_a_missing_bucket_is_named_not_read_as_an_empty_store(s3_server, capsys):
    """A bucket that does not exist is an error saying so (S3's NoSuchBucket), in the
    library and the CLI: not "no array here" nor "not a Zarr store?"."""
    import pytest

    from chunkstore.storage.object_store import NoSuchBucketError

    url = "s3://no-such-bucket-here/x.zarr"
    so = s3_server.storage_options
    for fn in (cs.open_array, cs.open_group, cs.open):
        with pytest.raises(NoSuchBucketError, match="does not exist") as info:
            fn(url, mode="r", storage_options=so)
        assert "no-such-bucket-here" in str(info.value)
    assert cli.main(["info", url, *options(s3_server)]) != 0
    err = capsys.readouterr().err
    assert "does not exist" in err and "no-such-bucket-here" in err
    assert "not a Zarr store" not in err and len(err.strip().splitlines()) == 1
