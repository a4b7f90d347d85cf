"""zarr-python 2 behaviour of groups and copy that its users rely on (issue 11)."""

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.hierarchy.convenience import CopyError


@pytest.fixture
def tree():
    g = cs.group()
    bar = g.create_group("bar")
    bar.create_group("baz")
    bar.create_group("quux").zeros("baz", shape=100, chunks=10)
    g.create_group("foo")
    return g


class TestHierarchy:
    def test_absolute_member_names(self, tree):
        sub = tree["bar/baz"]
        assert sub["/bar/quux/baz"].path == "bar/quux/baz"
        assert "/bar/quux" in sub and "/nothing" not in sub
        x = sub.create_group("/x")
        assert x.path == "x" and "x" in tree
        a = sub.zeros("/x/arr", shape=3)
        assert a.path == "x/arr"
        assert sub.require_group("/bar").path == "bar"
        del sub["/x/arr"]
        assert "x/arr" not in tree
        assert sub.create_group("rel").path == "bar/baz/rel"

    def test_array_keys_recurse_as_zarr2(self, tree):
        tree["bar"].zeros("a", shape=1)
        tree.zeros("z", shape=1)
        # Each array by its own name; per group sorted, subgroups walked in place.
        assert tree.array_keys(recurse=True) == ["a", "baz", "z"]
        assert [(k, v.path) for k, v in tree.arrays(recurse=True)] == [
            ("a", "bar/a"), ("baz", "bar/quux/baz"), ("z", "z")]
        assert tree.array_keys() == ["z"]

    def test_ipython_completion_and_dir(self, tree):
        tree.zeros("not-an-identifier", shape=1)
        assert tree._ipython_key_completions_() == ["bar", "foo", "not-an-identifier"]
        d = dir(tree)
        assert "bar" in d and "foo" in d and "create_group" in d
        assert "not-an-identifier" not in d

    def test_bytes_tree_is_ascii(self, tree):
        expect = ("/\n"
                  " +-- bar\n"
                  " |   +-- baz\n"
                  " |   +-- quux\n"
                  " |       +-- baz (100,) float64\n"
                  " +-- foo")
        assert bytes(tree.tree()) == expect.encode()
        # a subgroup's drawing is headed by its base name, as zarr-python 2's
        assert bytes(tree["bar"].tree()).decode().splitlines()[0] == "bar"
        # The text form draws the same tree with box characters.
        assert str(tree.tree()).replace("├── ", "+-- ").replace("└── ", "+-- ").replace(
            "│", "|").splitlines() == [ln[1:] if ln != "/" else ln
                                        for ln in expect.splitlines()]
        assert bytes(tree["bar"].tree(level=1)) == b"bar\n +-- baz\n +-- quux"

    def test_consolidate_metadata_returns_group(self, tmp_path):
        g = cs.group(str(tmp_path / "h.zarr"))
        g.create_group("a").zeros("b", shape=4)
        opened = cs.consolidate_metadata(str(tmp_path / "h.zarr"))
        assert isinstance(opened, cs.Group)
        assert isinstance(opened.store, cs.ConsolidatedMetadataStore)
        assert opened["a/b"].shape == (4,)


@pytest.fixture
def src():
    g = cs.group()
    foo = g.create_group("foo")
    foo.attrs["a"] = 1
    bar = foo.create_group("bar")
    bar.array("baz", np.arange(100), chunks=10)
    foo.array("qux", np.arange(30, dtype="f4"), chunks=30)
    return g


class TestCopy:
    def test_return_stats_and_bytes(self, src):
        dest = cs.group()
        stats = cs.copy(src["foo"], dest, return_stats=True)
        # groups foo, bar; arrays baz, qux; bytes uncompressed, as zarr-python 2 counts them
        assert stats == (4, 0, 100 * 8 + 30 * 4)
        assert cs.copy_all(src, cs.group(), return_stats=True) == stats

    def test_dry_run_counts_groups(self, src):
        # zarr-python 2's test_copy dry-run scenario.
        dest = cs.group()
        assert cs.copy(src["foo"], dest, dry_run=True, return_stats=True) == (4, 0, 0)
        assert len(dest) == 0
        dest.create_dataset("foo/bar/baz", data=np.arange(100, 200))
        with pytest.raises(CopyError):
            cs.copy(src["foo"], dest, dry_run=True)
        assert cs.copy(src["foo"], dest, dry_run=True, if_exists="skip",
                       return_stats=True) == (3, 1, 0)
        assert cs.copy(src["foo"], dest, dry_run=True, if_exists="replace",
                       return_stats=True) == (4, 0, 0)
        np.testing.assert_array_equal(dest["foo/bar/baz"][:], np.arange(100, 200))
        assert "foo/qux" not in dest

    def test_skip_initialized(self, src):
        dest = cs.group()
        full = dest.create_dataset("foo/bar/baz", data=np.arange(100, 200), chunks=10)
        part = dest.zeros("foo/qux", shape=30, chunks=10, dtype="f4")
        part[:10] = 7  # 1 of 3 chunks stored: not initialized, so replaced
        stats = cs.copy(src["foo"], dest, if_exists="skip_initialized", return_stats=True)
        assert stats == (3, 1, 30 * 4)
        np.testing.assert_array_equal(full[:], np.arange(100, 200))
        np.testing.assert_array_equal(dest["foo/qux"][:], np.arange(30, dtype="f4"))
        assert dest["foo/qux"].chunks == (30,)
        # Once everything is stored, nothing is copied again but the groups.
        assert cs.copy_all(src, dest, if_exists="skip_initialized") == (2, 2, 0)

    @pytest.mark.parametrize("dry_run", [False, True])
    def test_conflicts_raise_copy_error(self, src, dry_run):
        dest = cs.group()
        dest.zeros("foo", shape=1)          # an array where a group goes
        with pytest.raises(CopyError) as e:
            cs.copy(src["foo"], dest, dry_run=dry_run)
        assert isinstance(e.value, ValueError)
        dest2 = cs.group()
        dest2.create_group("foo/qux")       # a group where an array goes
        with pytest.raises(CopyError):
            cs.copy(src["foo"], dest2, dry_run=dry_run)
        with pytest.raises(CopyError):
            cs.copy_all(src, dest2, dry_run=dry_run)

    def test_bad_if_exists(self, src):
        for fn in (lambda: cs.copy(src["foo"], cs.group(), if_exists="sometimes"),
                   lambda: cs.copy_all(src, cs.group(), if_exists="sometimes")):
            with pytest.raises(ValueError, match="skip_initialized"):
                fn()
