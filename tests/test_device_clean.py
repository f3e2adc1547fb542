"""Every tensor that src/ builds says on which device it lives, or is named host-side code.

A factory without `device=` builds on the CPU. On a GPU run that is a crash where the tensor
meets a CUDA one (a 1-D CPU operand), or a silent host-to-device copy every time it runs: code
that only ever ran on a CPU shows neither. The scan reads the source, so it holds without a GPU.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "transformer_nmt"

# ---- THE ALLOWLIST: host-side code, "<file under src/transformer_nmt>:<function>" -------------
# Each entry builds tensors on the CPU on purpose; say why. When files move, update the paths:
# an entry whose function is gone, or that no longer builds a device-less tensor, fails below.
HOST_SIDE = {
    "data/framing.py:pad_batch": (
        "collate and the CLI pad token lists on the CPU; Lightning and translate() move them"
    ),
    "model/transformer/positions.py:SinusoidalPositionalEncoding.__init__": (
        "the position table, built once and registered as a buffer: it moves with the model"
    ),
    "model/transformer/layers.py:SublayerConnection.__init__": (
        "ReZero's alpha, a parameter built at init: it moves with the module"
    ),
    "training/step/bleu.py:SacreBLEU.__init__": (
        "metric state defaults: torchmetrics moves them with the module"
    ),
    "training/step/bleu.py:SacreCHRF.__init__": (
        "metric state defaults: torchmetrics moves them with the module"
    ),
    "training/step/bleu.py:SacreTER.__init__": (
        "metric state defaults: torchmetrics moves them with the module"
    ),
    "training/step/off_target.py:OffTargetRate.__init__": (
        "metric state defaults: torchmetrics moves them with the module"
    ),
    "model/transformer/positions.py:FairseqSinusoidalPositions.__init__": (
        "M2M-100's position table, built once and registered as a buffer: it moves with the model"
    ),
    "data/batching.py:collate": (
        "a batch's direction ids, built on the CPU beside its padded tokens; Lightning moves them"
    ),
}
# -----------------------------------------------------------------------------------------------

FACTORIES = {
    "tensor", "as_tensor", "zeros", "ones", "full", "arange", "empty",
    "rand", "randn", "randint", "linspace", "eye",
}  # fmt: skip


class FactoryCalls(ast.NodeVisitor):
    """Collects (qualified function name, line, source) of torch factories without `device=`."""

    def __init__(self) -> None:
        self.scope: list[str] = []
        self.functions: set[str] = set()
        self.from_torch: set[str] = set()  # factories imported by name: `from torch import zeros`
        self.calls: list[tuple[str, int, str]] = []

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module == "torch":
            self.from_torch |= {alias.asname or alias.name for alias in node.names}

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._scoped(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._scoped(node)
        self.functions.add(".".join([*self.scope, node.name]))

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Call(self, node: ast.Call) -> None:
        if self._is_factory(node.func) and all(k.arg != "device" for k in node.keywords):
            where = ".".join(self.scope) or "<module>"
            self.calls.append((where, node.lineno, ast.unparse(node)))
        self.generic_visit(node)

    def _is_factory(self, func: ast.expr) -> bool:
        if isinstance(func, ast.Attribute):
            is_torch = isinstance(func.value, ast.Name) and func.value.id == "torch"
            return is_torch and func.attr in FACTORIES
        return isinstance(func, ast.Name) and func.id in FACTORIES & self.from_torch

    def _scoped(self, node: ast.ClassDef | ast.FunctionDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()


def scan(source: str) -> FactoryCalls:
    calls = FactoryCalls()
    calls.visit(ast.parse(source))
    return calls


def scan_package() -> dict[str, FactoryCalls]:
    """{file under the package: its scan}."""
    return {
        path.relative_to(PACKAGE).as_posix(): scan(path.read_text())
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def test_every_tensor_built_in_src_names_its_device():
    offenders = [
        f"src/transformer_nmt/{file}:{line} in {function}: {call}"
        for file, calls in scan_package().items()
        for function, line, call in calls.calls
        if f"{file}:{function}" not in HOST_SIDE
    ]
    assert not offenders, (
        "tensors built without device= (pass device=<a tensor it meets>.device, or add the "
        "function to HOST_SIDE in tests/test_device_clean.py if it is host-side code):\n"
        + "\n".join(offenders)
    )


@pytest.mark.parametrize("entry", sorted(HOST_SIDE))
def test_every_allowlist_entry_is_still_needed(entry):
    file, function = entry.split(":")
    calls = scan_package().get(file)
    assert calls is not None, f"{entry}: no file src/transformer_nmt/{file}; update HOST_SIDE"
    assert function in calls.functions, f"{entry}: no function {function} in {file}"
    assert any(where == function for where, _, _ in calls.calls), (
        f"{entry}: builds no tensor without device= any more; remove it from HOST_SIDE"
    )


def test_the_scan_finds_each_way_of_calling_a_factory():
    calls = scan(
        "import torch\n"
        "from torch import zeros\n"
        "x = torch.arange(3)\n"
        "class A:\n"
        "    def f(self, like):\n"
        "        torch.full((2,), 0, dtype=torch.long)\n"
        "        zeros(2)\n"
        "        return torch.tensor([1], device=like.device), torch.zeros_like(like)\n"
    )
    assert [(where, line) for where, line, _ in calls.calls] == [
        ("<module>", 3),
        ("A.f", 6),
        ("A.f", 7),
    ]
    assert calls.functions == {"A.f"}
