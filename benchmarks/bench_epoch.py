"""One training epoch of the molhiv PNA recipe: our network against the same
network built from PyG's layers, same weights, same batches.

The recipe's network (``examples/ogbg_molhiv_pna.py``: 4 "simple" PNA layers,
hidden 80, mean readout) is built once with pyg_agg's
``DegreeScalerAggregation`` and once with PyG's in each layer (PyG's std is
its own, ``sqrt(clamp(var, eps))``, the paper's ``sqrt(relu(var) + eps)`` in
ours: the same cost). One step is one epoch over the training split, batch
128: forward, loss, backward and an Adam step. The dataset is ``--dataset``
under the data root (``--root``, ``$PYG_AGG_DATA``): ogbg-molhiv when built
(``pyg-agg build-ogb``), otherwise say ogbg-molbace, whose molecules are of
the same kind.

    python benchmarks/bench_epoch.py --dataset ogbg-molhiv --root datasets
    python benchmarks/bench_epoch.py --dataset ogbg-molbace --root ../shared/datasets
"""
from __future__ import annotations

import argparse
import copy
import importlib.util
from pathlib import Path

import torch
from common import Case, run_cases
from torch_geometric.loader import DataLoader
from torch_geometric.nn.aggr import DegreeScalerAggregation as PyGDegreeScalerAggregation

from pyg_agg.datasets import load_dataset
from pyg_agg.pipelines.config import TrainConfig
from pyg_agg.pipelines.models import PNA_AGGREGATORS, PNA_SCALERS, PNASimpleConv, build_model


def recipe() -> dict:
    """The molhiv recipe, read from its example script."""
    path = Path(__file__).parents[1] / "examples" / "ogbg_molhiv_pna.py"
    spec = importlib.util.spec_from_file_location("ogbg_molhiv_pna", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.RECIPE)


def with_pyg_aggregation(model: torch.nn.Module, deg: torch.Tensor) -> torch.nn.Module:
    """A copy of ``model`` whose PNA layers aggregate with PyG's module."""
    twin = copy.deepcopy(model)
    for conv in twin.modules():
        if isinstance(conv, PNASimpleConv):
            pyg = PyGDegreeScalerAggregation(list(PNA_AGGREGATORS), list(PNA_SCALERS), deg)

            def forward(x, edge_index, conv=conv, pyg=pyg):
                source, target = edge_index
                return conv.lin(pyg(x.index_select(0, source), target, dim_size=x.size(0)))

            conv.forward = forward
    return twin


def epoch_case(args) -> Case:
    settings = recipe()
    settings.update(dataset=args.dataset, root=args.root, out=None)
    cfg = TrainConfig(**{k: v for k, v in settings.items() if k in TrainConfig.__dataclass_fields__})
    task = load_dataset(cfg.dataset, args.root)
    torch.manual_seed(0)
    ours = build_model(cfg, task)
    from pyg_agg.nn import PNAConv

    deg = PNAConv.get_degree_histogram(task.dataset[task.split["train"]])
    models = {"pyg": with_pyg_aggregation(ours, deg), "ours": ours}
    train = task.dataset[task.split["train"]]
    batches = list(DataLoader(train, batch_size=cfg.batch_size, shuffle=True,
                              generator=torch.Generator().manual_seed(0)))

    def epoch(model):
        optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)

        def run():
            model.train()
            for batch in batches:
                optimizer.zero_grad(set_to_none=True)
                out = model(batch)
                labelled = ~torch.isnan(batch.y)
                loss = torch.nn.functional.binary_cross_entropy_with_logits(
                    out[labelled], batch.y[labelled].float())
                loss.backward()
                optimizer.step()
        return run

    return Case(f"one training epoch of the molhiv PNA recipe on {cfg.dataset}: "
                f"{len(train)} graphs in {len(batches)} batches of {cfg.batch_size}",
                {name: epoch(model) for name, model in models.items()})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", default="ogbg-molhiv")
    parser.add_argument("--root", default=None, help="data root (default: $PYG_AGG_DATA)")


if __name__ == "__main__":
    run_cases(__doc__, {"epoch": epoch_case}, add_arguments)
