"""Dataset builders and offline loaders."""
from pyg_agg.datasets.dictionary_lookup import DictionaryLookup
from pyg_agg.datasets.pna_multitask import PNAMultitask
from pyg_agg.datasets.second_minimum import SecondMinimum
from pyg_agg.datasets.tu import load_tu

__all__ = ["DictionaryLookup", "PNAMultitask", "SecondMinimum", "load_tu"]
