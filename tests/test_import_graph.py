"""No import cycles: between the package's wings (its folders, and each module at its root), and
between any two modules. An import inside a function or under `TYPE_CHECKING` counts: it names
the same dependency, only later."""

from pathlib import Path

from helpers.import_graph import find_cycle, graph, modules, wing_graph


def test_no_import_cycle_between_wings():
    cycle = find_cycle(wing_graph(modules()))
    assert cycle is None, f"wings import each other: {' -> '.join(cycle)}"


def test_no_import_cycle_between_modules():
    cycle = find_cycle(graph(modules()))
    assert cycle is None, f"modules import each other: {' -> '.join(cycle)}"


def write_package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_a_cycle_through_a_function_level_import_is_found(tmp_path):
    src = write_package(
        tmp_path,
        {
            "__init__.py": "",
            "core.py": "",
            "a/__init__.py": "",
            "a/x.py": "from pkg.b import y\nfrom pkg import core\n",
            "b/__init__.py": "",
            "b/y.py": "def late():\n    from pkg.a.x import name\n",
        },
    )
    known = modules(src)
    assert find_cycle(graph(known)) == ["pkg.a.x", "pkg.b.y", "pkg.a.x"]
    assert find_cycle(wing_graph(known)) == ["a", "b", "a"]


def test_a_cycle_inside_one_wing_is_a_module_cycle_only(tmp_path):
    src = write_package(
        tmp_path,
        {
            "__init__.py": "",
            "a/__init__.py": "",
            "a/x.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .y import Y\n",
            "a/y.py": "from pkg.a import x\n",
        },
    )
    known = modules(src)
    assert find_cycle(graph(known)) == ["pkg.a.x", "pkg.a.y", "pkg.a.x"]
    assert find_cycle(wing_graph(known)) is None


def test_importing_a_name_from_a_package_depends_on_its_init_not_its_siblings(tmp_path):
    src = write_package(
        tmp_path,
        {
            "__init__.py": "",
            "a/__init__.py": "from pkg.a.x import NAME\n",
            "a/x.py": "from pkg.a import y\nNAME = 1\n",
            "a/y.py": "",
            "b.py": "from pkg.a import NAME, y\n",
        },
    )
    known = modules(src)
    assert graph(known)["pkg.b"] == {"pkg.a", "pkg.a.y"}
    assert graph(known)["pkg.a.x"] == {"pkg.a.y"}
    assert find_cycle(graph(known)) is None
