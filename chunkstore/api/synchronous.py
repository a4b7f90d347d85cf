"""zarr-python 3's ``zarr.api.synchronous``: the functions of chunkstore's top level."""

from chunkstore import (array, consolidate_metadata, copy, copy_all, copy_store,  # noqa: F401
                        create, create_array, create_group, create_hierarchy, empty, empty_like,
                        from_array, full, full_like, group, load, ones, ones_like, open,
                        open_array, open_consolidated, open_group, open_like, save, save_array,
                        save_group, tree, zeros, zeros_like)

__all__ = ["array", "consolidate_metadata", "copy", "copy_all", "copy_store", "create",
           "create_array", "create_group", "create_hierarchy", "empty", "empty_like",
           "from_array", "full", "full_like", "group", "load", "ones", "ones_like", "open",
           "open_array", "open_consolidated", "open_group", "open_like", "save", "save_array",
           "save_group", "tree", "zeros", "zeros_like"]
