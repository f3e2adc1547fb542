"""The package's import graph read from its source with `ast`: every import, at the top of a
module or inside a function, since either runs once the code does."""

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "transformer_nmt"
SRC = Path(__file__).resolve().parents[2] / "src" / PACKAGE


@dataclass(frozen=True)
class Module:
    name: str  # dotted, e.g. transformer_nmt.inference.translator
    path: Path

    @property
    def wing(self) -> str:
        """The package's folder the module lives in; a module at the root is its own node."""
        parts = self.name.split(".")
        in_folder = len(parts) > 2 or (len(parts) == 2 and self.path.name == "__init__.py")
        return parts[1] if in_folder else self.name


def modules(src: Path = SRC) -> dict[str, Module]:
    """Every module of the package under `src`, by dotted name (a package by its own name)."""
    found = {}
    for path in sorted(src.rglob("*.py")):
        parts = [src.name, *path.relative_to(src).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = Module(".".join(parts), path)
    return found


def _imports(module: Module) -> Iterator[tuple[str, list[str]]]:
    """(module imported, the names taken from it: [] for `import a.b`) of each import statement."""
    tree = ast.parse(module.path.read_text(encoding="utf-8"), str(module.path))
    package = module.name if module.path.name == "__init__.py" else module.name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: up from the module's package
                above = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*above, base] if base else above)
            yield base, [alias.name for alias in node.names]


def package_imports(module: Module, known: dict[str, Module]) -> set[str]:
    """The package's modules that `module` imports: from `from a import b`, module a.b where
    there is one, else a (the names of its `__init__`)."""
    found = set()
    for base, names in _imports(module):
        submodules = {f"{base}.{name}" for name in names} & known.keys()
        found |= submodules
        if base in known and (not names or len(submodules) < len(names)):
            found.add(base)
    found.discard(module.name)
    return found


def third_party_imports(module: Module) -> set[str]:
    """The top-level names of everything `module` imports (stdlib and third-party alike)."""
    return {base.split(".")[0] for base, _ in _imports(module) if base}


def graph(known: dict[str, Module]) -> dict[str, set[str]]:
    """Each module's package imports."""
    return {name: package_imports(module, known) for name, module in known.items()}


def wing_graph(known: dict[str, Module]) -> dict[str, set[str]]:
    """Which wings each wing imports (a module at the root is a wing of its own)."""
    wings: dict[str, set[str]] = {module.wing: set() for module in known.values()}
    for name, targets in graph(known).items():
        wings[known[name].wing] |= {known[t].wing for t in targets} - {known[name].wing}
    return wings


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """A cycle of `edges` as its nodes, the first repeated at the end; None if there is none."""
    done: set[str] = set()
    for start in sorted(edges):
        if start in done:
            continue
        path, on_path = [start], {start}
        stack = [(start, iter(sorted(edges[start])))]
        while stack:
            node, targets = stack[-1]
            target = next(targets, None)
            if target is None:
                stack.pop()
                done.add(path.pop())
                on_path.discard(node)
            elif target in on_path:
                return [*path[path.index(target) :], target]
            elif target not in done:
                stack.append((target, iter(sorted(edges.get(target, ())))))
                path.append(target)
                on_path.add(target)
    return None
