"""``pyg-agg``: command-line entry point.

    pyg-agg train --dataset ogbg-molbace --model pna --epochs 50 --out runs/bace
    torchrun --nproc_per_node 2 -m pyg_agg.cli train --dataset ... (DDP)
    pyg-agg build-ogb --smiles HIV.csv.gz --name ogbg-molhiv --split scaffold --root DIR
    pyg-agg datasets --root DIR      every dataset name, present or missing under DIR
    pyg-agg demo --epochs 2   (our layers beside PyG's; see pyg_agg.demo)
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, Optional

from pyg_agg.datasets.registry import DATASETS, DatasetSpec
from pyg_agg.datasets.root import data_root
from pyg_agg.demo import DEFAULT_EPOCHS
from pyg_agg.pipelines.config import SCHEDULERS, TrainConfig
from pyg_agg.pipelines.models import HEADS, MODELS, READOUTS


def _int_list(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",")]
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") \
            from err


def add_train_arguments(parser: argparse.ArgumentParser, **defaults) -> None:
    """The ``train`` options; ``defaults`` override them (used by the example recipes)."""
    d = TrainConfig(dataset="", model="")
    add = parser.add_argument
    add("--dataset", required="dataset" not in defaults,
        help="dataset name (ogbg-mol*, ogbn-*, Cora, CiteSeer, MUTAG, ..., synthetic-*; "
             "'pyg-agg datasets' lists them)")
    add("--model", required="model" not in defaults, help=f"one of {', '.join(MODELS)}")
    add("--readout", help=f"graph tasks: one of {', '.join(READOUTS)} (default mean)")
    add("--hidden", type=int, default=d.hidden, help="hidden width")
    add("--layers", type=int, default=d.layers, help="number of message-passing layers")
    add("--heads", type=int, default=d.heads, help="attention heads (gat, gatv2)")
    add("--towers", type=int, default=d.towers, help="PNA towers")
    add("--head", choices=HEADS, default=d.head,
        help="graph tasks: prediction head (halving: h -> h/2 -> h/4 -> out, PNA's OGB code)")
    add("--dropout", type=float, default=d.dropout)
    add("--dropout-after-residual", action=argparse.BooleanOptionalAction,
        default=d.dropout_after_residual,
        help="graph tasks: dropout on h + conv(h) instead of on the conv branch (PNA's OGB code)")
    add("--lr", type=float, default=d.lr)
    add("--weight-decay", type=float, default=d.weight_decay)
    add("--batch-size", type=int, default=d.batch_size,
        help="graphs per batch; nodes per batch with --num-neighbors")
    add("--num-neighbors", type=_int_list,
        help="node tasks: NeighborLoader fan-outs per layer, e.g. 10,10,10 (default full-batch)")
    add("--epochs", type=int, default=d.epochs)
    add("--runs", type=int, default=d.runs, help="independent runs (seeds seed..seed+runs-1)")
    add("--seed", type=int, default=d.seed)
    add("--scheduler", choices=SCHEDULERS, default=d.scheduler)
    add("--min-lr", type=float, default=d.min_lr, help="plateau scheduler's lower bound")
    add("--device", default=d.device, help="auto, cpu, cuda or cuda:N")
    add("--workers", type=int, default=d.workers, help="DataLoader worker processes")
    add("--root", help="data root (default $PYG_AGG_DATA or ./datasets)")
    add("--out", default=d.out, help="run folder")
    add("--resume", action="store_true", help="continue every run from its last.pt")
    add("--overwrite", action="store_true",
        help="replace the runs already in --out (without it, a folder holding a run is refused)")
    add("--deterministic", action="store_true", help="torch deterministic algorithms")
    parser.set_defaults(**defaults)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    fields = TrainConfig.__dataclass_fields__
    return TrainConfig(**{k: v for k, v in vars(args).items() if k in fields})


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pyg-agg", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    add_train_arguments(sub.add_parser("train", help="train a model on a dataset"))
    build = sub.add_parser("build-ogb", help="SMILES CSV -> OGB-format graph-property folder")
    build.add_argument("--smiles", required=True, help="CSV (or .csv.gz) with SMILES")
    build.add_argument("--name", default="ogbg-molhiv", help="ogbg-mol* name to build")
    build.add_argument("--split", default="scaffold", choices=("scaffold",))
    build.add_argument("--root", default="datasets", help="data root to write into")
    build.add_argument("--smiles-column", default="smiles")
    build.add_argument("--label-columns", help="comma-separated (default: all other columns)")
    build.add_argument("--on-invalid", choices=("error", "skip"), default="error",
                       help="unparseable rows: fail (default) or leave out and list")
    build.add_argument("--limit", type=int, help="only the first N rows")
    build.add_argument("--overwrite", action="store_true")
    listing = sub.add_parser("datasets", help="list every dataset name, present or missing "
                                              "under the data root")
    listing.add_argument("--root", help="data root (default $PYG_AGG_DATA or ./datasets)")
    demo = sub.add_parser("demo", help="our layers beside PyG's: same weights, metric, time, memory")
    demo.add_argument("--epochs", type=int, default=DEFAULT_EPOCHS,
                      help=f"training epochs per network and dataset (default {DEFAULT_EPOCHS})")
    demo.add_argument("--root", help="data root (default $PYG_AGG_DATA or ./datasets)")
    demo.add_argument("--out", default="runs/demo", help="folder for demo.json and demo.png")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--threads", type=int, default=1,
                      help="torch threads (default 1: steadier times on small batches and on a "
                           "shared machine)")
    return parser


def _build_ogb(args: argparse.Namespace) -> None:
    from pyg_agg.datasets.smiles_to_ogb import build_ogb

    report = build_ogb(args.smiles, name=args.name, root=args.root, split=args.split,
                       smiles_column=args.smiles_column,
                       label_columns=args.label_columns.split(",") if args.label_columns
                       else None,
                       on_invalid=args.on_invalid, overwrite=args.overwrite, limit=args.limit)
    print(f"{report.name}: {report.num_graphs} graphs from {report.num_rows} rows -> "
          f"{report.path} ({report.seconds}s)")
    print(f"mean nodes {report.mean_nodes:.2f}, mean bonds {report.mean_bonds:.2f}, split "
          + " / ".join(f"{k} {v}" for k, v in report.split_sizes.items()))
    for row in report.lenient_rows:
        print(f"lenient parse: row {row['row']}: {row['smiles']}")
    for row in report.invalid_rows:
        print(f"invalid, left out: row {row['row']}: {row['smiles']} ({row['error']})")


def recipe_parser(description: str, recipe: dict[str, Any]) -> argparse.ArgumentParser:
    """A ``train`` parser whose defaults are a published recipe (for ``examples/``)."""
    parser = argparse.ArgumentParser(description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_train_arguments(parser, **recipe)
    return parser


#: What bad input raises: settings, files, folders, checkpoints and missing packages.
#: Each is reported as one line and exit status 2; anything else is a bug and keeps
#: its traceback.
INPUT_ERRORS = (ValueError, OSError, ImportError)


def train_from_args(args: argparse.Namespace) -> int:
    """Validates, then trains; bad input returns status 2 with a one-line message."""
    from pyg_agg.pipelines.train import run_training

    try:
        # settings, --out and checkpoints are checked before the dataset is loaded
        run_training(config_from_args(args))
    except INPUT_ERRORS as err:
        return _fail("train", err)
    return 0


def build_ogb_from_args(args: argparse.Namespace) -> int:
    """Builds the folder; bad input returns status 2 with a one-line message."""
    try:
        _build_ogb(args)
    except INPUT_ERRORS as err:
        return _fail("build-ogb", err)
    return 0


def dataset_availability(root: Optional[str]) -> list[tuple[DatasetSpec, str]]:
    """Every registry entry with where it is: its folder, ``generated`` or ``missing``."""
    rows = []
    for spec in DATASETS.values():
        try:
            folder = spec.locate(root)
        except FileNotFoundError:
            where = "missing" + (" (pyg-agg build-ogb builds it from SMILES)"
                                 if spec.ogb_molecule else "")
        else:
            where = "generated in memory" if folder is None else f"present: {folder}"
        rows.append((spec, where))
    return rows


def list_datasets_from_args(args: argparse.Namespace) -> int:
    """Prints every dataset name with its level, task, metric and presence."""
    rows = dataset_availability(args.root)
    width = max(len(spec.name) for spec, _ in rows)
    print(f"data root: {data_root(args.root)}")
    for spec, where in rows:
        print(f"{spec.name:<{width}}  {spec.level:<5}  {spec.task:<10}  {spec.metric:<6}  "
              f"{where}")
    present = sum(where.startswith("present") for _, where in rows)
    missing = sum(where.startswith("missing") for _, where in rows)
    print(f"{present} present, {missing} missing, {len(rows) - present - missing} generated")
    return 0


def demo_from_args(args: argparse.Namespace) -> int:
    """Runs the demo; bad input returns status 2 with a one-line message."""
    from pyg_agg.demo import main as run_demo

    try:
        run_demo(epochs=args.epochs, root=args.root, out=args.out, seed=args.seed,
                 threads=args.threads)
    except INPUT_ERRORS as err:
        return _fail("demo", err)
    return 0


COMMANDS = {"train": train_from_args, "build-ogb": build_ogb_from_args,
            "datasets": list_datasets_from_args, "demo": demo_from_args}


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs ``pyg-agg``; returns the exit status."""
    args = _build_parser().parse_args(argv)
    return COMMANDS[args.command](args)


def _fail(command: str, err: Exception) -> int:
    print(f"pyg-agg {command}: error: {err}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
