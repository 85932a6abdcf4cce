from pyg_agg.datasets.tu import load_tu  # noqa: F401
from pyg_agg.datasets.second_minimum import SecondMinimum  # noqa: F401
from pyg_agg.datasets.pna_multitask import PNAMultitask  # noqa: F401
from pyg_agg.datasets.dictionary_lookup import DictionaryLookup  # noqa: F401
