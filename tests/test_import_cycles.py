"""Package structure: no import cycles between chunkstore's own modules.

The import graph is built from the source with `ast` (nothing is imported): every `import`
and `from ... import` anywhere in a module counts, function-level (lazy) ones included, and
so does `importlib.import_module("chunkstore....")` - a cycle hidden behind a lazy import is
still a cycle in the design. A strongly connected component of more than one module is a
cycle. `from package import name` is an edge to the package's __init__ when name is not a
submodule; the implicit import of a submodule's parent packages is not (it would make every
package a cycle with the modules its __init__ re-exports).
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

PACKAGE = "chunkstore"
ROOT = Path(importlib.util.find_spec(PACKAGE).origin).parent   # found without importing it


def _modules(root=ROOT, package=PACKAGE):
    """{dotted module name: path} of every .py and .pyx file of the package at root."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".py", ".pyx") or not path.is_file():
            continue
        parts = (package,) + path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imported(name, path, modules):
    """The package's modules that the module `name` (at path) imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    # the package relative imports start from: the module's own package
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                parts = parts[:len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in modules:      # `from package import module`
                    found.add(submodule)
                else:                         # a name defined in (or re-exported by) base
                    found.add(base)
        elif (isinstance(node, ast.Call) and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and (getattr(node.func, "attr", None) == "import_module"
                   or getattr(node.func, "id", None) == "import_module")):
            found.add(node.args[0].value)
    return {m for m in found if m in modules and m != name}


def import_graph(root=ROOT, package=PACKAGE):
    """{module: the package's modules it imports}; .pyx files (Cython) are not parsed."""
    modules = _modules(root, package)
    return {name: _imported(name, path, modules)
            for name, path in modules.items() if path.suffix == ".py"}


def strongly_connected_components(graph):
    """Tarjan's algorithm, iterative (no recursion limit on deep graphs)."""
    index, low, on_stack, stack, components = {}, {}, set(), [], []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, edges = work[-1]
            for w in edges:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    components.append(sorted(component))
    return components


def import_cycles(graph):
    return sorted(c for c in strongly_connected_components(graph) if len(c) > 1)


def test_the_graph_sees_lazy_relative_and_importlib_imports(tmp_path):
    # the walker itself, on a little package of its own making
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pkg.a import f\n")
    (pkg / "a.py").write_text("def f():\n    from . import b\n    return b\n")
    (pkg / "b.py").write_text("import importlib\nmod = importlib.import_module('pkg.sub.c')\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "c.py").write_text("from ..a import f\nfrom pkg.sub import d\n")
    (pkg / "sub" / "d.py").write_text("import os\nfrom pkg import helper_name\n")
    graph = import_graph(pkg, "pkg")
    assert graph == {"pkg": {"pkg.a"}, "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.sub.c"},
                     "pkg.sub": set(), "pkg.sub.c": {"pkg.a", "pkg.sub.d"},
                     "pkg.sub.d": {"pkg"}}
    assert import_cycles(graph) == [["pkg", "pkg.a", "pkg.b", "pkg.sub.c", "pkg.sub.d"]]
    graph["pkg.sub.d"].discard("pkg")
    assert import_cycles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"]]


def test_no_import_cycles():
    graph = import_graph()
    assert len(graph) > 20 and graph[PACKAGE], "the walker found no modules or no imports"
    cycles = import_cycles(graph)
    assert not cycles, "import cycles between chunkstore modules:\n" + "\n".join(
        "  " + " <-> ".join(c) for c in cycles)
