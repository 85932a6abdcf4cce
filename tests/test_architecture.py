"""The layer rules of docs/architecture.md, checked on every module's imports and calls."""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pyg_agg"
#: For each layer, the other pyg_agg modules it may import (prefixes).
ALLOWED = {
    "ops": ("pyg_agg.ops", "pyg_agg.datasets.root"),
    "nn": ("pyg_agg.nn", "pyg_agg.ops"),
    "datasets": ("pyg_agg.datasets", "pyg_agg.ops"),
    "pipelines": ("pyg_agg.pipelines", "pyg_agg.datasets", "pyg_agg.nn", "pyg_agg.ops"),
}
#: Kernel-level calls and modules that belong in pyg_agg/ops only.
KERNEL_ATTRIBUTES = {"scatter_reduce", "scatter_reduce_", "segment_reduce", "index_reduce",
                     "index_reduce_"}
KERNEL_MODULES = ("torch_scatter", "triton", "torch.library", "torch.utils.cpp_extension")


def _modules(layer: str) -> list[Path]:
    return sorted((PACKAGE / layer).rglob("*.py"))


def _imports(path: Path, with_names: bool = False) -> list[str]:
    """Imported modules; with ``with_names``, also ``module.name`` of each from-import
    (``from torch import library`` is ``torch.library``)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            if with_names:
                names += [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def _starts(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_a_layer_imports_only_the_layers_below_it(layer):
    wrong = [f"{path.relative_to(PACKAGE.parent)}: {name}"
             for path in _modules(layer) for name in _imports(path)
             if _starts(name, ("pyg_agg",)) and not _starts(name, ALLOWED[layer])]
    assert not wrong, wrong


@pytest.mark.parametrize("layer", ["nn", "datasets", "pipelines"])
def test_kernels_live_only_in_ops(layer):
    found = []
    for path in _modules(layer):
        tree = ast.parse(path.read_text())
        found += [f"{path.name}:{node.lineno} .{node.attr}" for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and node.attr in KERNEL_ATTRIBUTES]
        found += [f"{path.name}: import {name}" for name in _imports(path, with_names=True)
                  if _starts(name, KERNEL_MODULES)]
    assert not found, found


def test_pipelines_hold_no_dataset_loaders():
    """Loaders and builders live in pyg_agg.datasets; pipelines ask its registry."""
    found = [f"{path.name}: {name}" for path in _modules("pipelines") for name in _imports(path)
             if _starts(name, ("torch_geometric.datasets", "rdkit"))
             or (name.startswith("ogb.") and name.endswith("Dataset"))]
    assert not found, found


def test_layers_use_only_the_public_api_of_ops():
    """``pyg_agg.nn`` imports kernels as ``from pyg_agg.ops import name``, with
    ``name`` in ``pyg_agg.ops.__all__``: never a submodule or a private name."""
    import pyg_agg.ops

    found = [f"{path.name}: {name}" for path in _modules("nn")
             for name in _imports(path, with_names=True)
             if _starts(name, ("pyg_agg.ops",)) and name != "pyg_agg.ops"
             and name.removeprefix("pyg_agg.ops.") not in pyg_agg.ops.__all__]
    assert not found, found
