"""Datasets: the registry of every trainable set, its offline loaders and builders."""
from pyg_agg.datasets.dictionary_lookup import DictionaryLookup
from pyg_agg.datasets.pna_multitask import PNAMultitask
from pyg_agg.datasets.registry import DatasetSpec, dataset_names, dataset_spec, load_dataset
from pyg_agg.datasets.second_minimum import SecondMinimum
from pyg_agg.datasets.smiles_to_ogb import build_ogb
from pyg_agg.datasets.task import TaskData
from pyg_agg.datasets.tu import load_tu

__all__ = ["DatasetSpec", "DictionaryLookup", "PNAMultitask", "SecondMinimum", "TaskData",
           "build_ogb", "dataset_names", "dataset_spec", "load_dataset", "load_tu"]
