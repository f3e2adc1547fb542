"""experiments/ as a package: every module says what it is, none edits the import path."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def modules(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def code_nodes(path: Path) -> list[ast.AST]:
    """The module's nodes, docstrings left out."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef) and ast.get_docstring(node)
    }
    return [node for node in ast.walk(tree) if id(node) not in docstrings]


def sys_path_edits(path: Path) -> list[int]:
    nodes = code_nodes(path)
    return [
        n.lineno for n in nodes if isinstance(n, ast.Attribute) and ast.unparse(n) == "sys.path"
    ]


def pythonpath_edits(path: Path) -> list[int]:
    """Lines that hand a child process a PYTHONPATH of their own."""
    return [
        n.lineno
        for n in code_nodes(path)
        if isinstance(n, ast.Constant) and n.value == "PYTHONPATH"
    ]


def test_every_experiment_module_opens_with_a_docstring():
    bare = [p for p in modules("experiments") if not ast.get_docstring(ast.parse(p.read_text()))]
    assert not bare


def test_experiments_import_from_the_repository_root_without_path_edits():
    # `python -m experiments.<folder>.<script>`; train.py's children find experiments/ beside it.
    edits = {
        str(p.relative_to(ROOT)): lines
        for p in modules("experiments")
        if (lines := sys_path_edits(p) + pythonpath_edits(p))
    }
    assert edits == {}


def test_tests_import_their_helpers_without_sys_path_edits():
    # pyproject.toml puts the repository root and tests/ on the path for every test.
    edits = {
        str(p.relative_to(ROOT)): lines for p in modules("tests") if (lines := sys_path_edits(p))
    }
    assert edits == {}
