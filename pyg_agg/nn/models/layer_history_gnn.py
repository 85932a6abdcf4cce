"""A GNN stack that returns every layer's node activations."""
from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import ModuleList
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader


class LayerHistoryGNN(torch.nn.Module):
    r"""Runs a stack of message-passing layers and keeps their history.

    For node features :math:`X^{(0)}` and layers :math:`f_1..f_L`,

    .. math::
        X^{(l)} = \mathrm{drop}\big(\sigma\big(\mathrm{norm}_l
            (f_l(X^{(l-1)}, \mathcal{E}))\big)\big),

    and :meth:`forward` returns :math:`X^{(L)}` together with the history
    :math:`[X^{(1)}, \dots, X^{(L)}]` (optionally with :math:`X^{(0)}` in
    front), which :class:`~pyg_agg.nn.HistoGraphReadout` or PyG's
    :class:`~torch_geometric.nn.models.JumpingKnowledge` read. Any
    convolution works (ours or PyG's); extra keyword arguments of
    :meth:`forward` (e.g. ``edge_attr``) are passed to every layer whose
    ``forward`` accepts them.

    **Frozen backbone** (the HISTOGRAPH paper's head-only training):
    :meth:`freeze` stops gradients and dropout in the stack,
    :meth:`cache_history` runs it once over a dataset and returns
    ``Data(history=[N, sum F_l], y=...)`` objects that a
    :class:`~torch_geometric.loader.DataLoader` batches as usual, and
    :meth:`split_history` turns a batched ``history`` back into the list of
    per-layer tensors the readout takes. Only the readout is then trained,
    with no message passing per step.

    Args:
        convs: The :math:`L` layers, called as ``conv(x, edge_index, **kw)``.
        norms: Optional per-layer normalisations (e.g.
            :class:`torch.nn.BatchNorm1d`), applied before the activation.
        act: Activation after every layer (None for identity).
        dropout: Dropout after every layer's activation.
        act_last: Also apply ``act`` (and dropout) after the last layer.
        include_input: Put the input features in front of the history.

    Shapes:
        - **input:** ``x`` :math:`(N, F_0)`, ``edge_index`` :math:`(2, E)`.
        - **output:** :math:`(N, F_L)` and a list of :math:`L` (or
          :math:`L + 1`) tensors :math:`(N, F_l)`.
    """

    def __init__(
        self,
        convs: Sequence[torch.nn.Module],
        norms: Optional[Sequence[torch.nn.Module]] = None,
        act: Optional[Callable[[Tensor], Tensor]] = F.relu,
        dropout: float = 0.0,
        act_last: bool = True,
        include_input: bool = False,
    ) -> None:
        super().__init__()
        if len(convs) == 0:
            raise ValueError("`convs` must hold at least one layer")
        if norms is not None and len(norms) != len(convs):
            raise ValueError(
                f"`norms` has {len(norms)} entries but there are {len(convs)} `convs`"
            )
        self.convs = ModuleList(convs)
        self.norms = ModuleList(norms) if norms is not None else None
        self.act = act
        self.dropout = dropout
        self.act_last = act_last
        self.include_input = include_input
        self.frozen = False
        self.history_widths: Optional[list[int]] = None  # set by cache_history()
        # which extra keyword arguments each layer's forward accepts
        self._accepts = [_forward_parameters(conv) for conv in self.convs]

    @property
    def num_layers(self) -> int:
        """Number of message-passing layers :math:`L`."""
        return len(self.convs)

    def reset_parameters(self) -> None:
        r"""Resets all learnable parameters of the module."""
        for module in [*self.convs, *(self.norms or [])]:
            if hasattr(module, "reset_parameters"):
                module.reset_parameters()

    def forward(
        self, x: Tensor, edge_index: Tensor, **kwargs: Tensor
    ) -> tuple[Tensor, list[Tensor]]:
        r"""Returns the last layer's output and the list of every layer's."""
        history = [x] if self.include_input else []
        for i, conv in enumerate(self.convs):
            accepted = self._accepts[i]
            extra = kwargs if accepted is None else {
                k: v for k, v in kwargs.items() if k in accepted
            }
            x = conv(x, edge_index, **extra)
            if self.norms is not None:
                x = self.norms[i](x)
            if i < self.num_layers - 1 or self.act_last:
                if self.act is not None:
                    x = self.act(x)
                x = F.dropout(x, self.dropout, self.training)
            history.append(x)
        return x, history

    def freeze(self) -> LayerHistoryGNN:
        """Stops gradients to the stack and keeps it in eval mode."""
        self.requires_grad_(False)
        self.frozen = True
        return self.eval()

    def train(self, mode: bool = True) -> LayerHistoryGNN:
        # a frozen backbone must not switch dropout/BatchNorm back to training
        return super().train(mode and not self.frozen)

    @torch.no_grad()
    def cache_history(
        self,
        dataset: Iterable[Data],
        batch_size: int = 128,
        device: Optional[torch.device] = None,
        keys: Sequence[str] = ("y",),
    ) -> list[Data]:
        """Runs the stack once over ``dataset`` and returns one
        ``Data(history=[N, sum F_l], num_nodes=N, <keys>)`` per graph, on CPU.

        Call :meth:`freeze` first for a frozen backbone; caching in training
        mode would freeze one random dropout draw.
        """
        if self.training:
            raise RuntimeError(
                "cache_history() needs eval mode: call .freeze() (or .eval()) first"
            )
        device = device or next(self.parameters(), torch.empty(0)).device
        cached: list[Data] = []
        for batch in DataLoader(list(dataset), batch_size=batch_size):
            batch = batch.to(device)
            extra = {k: batch[k] for k in ("edge_attr",) if batch.get(k) is not None}
            _, history = self(batch.x, batch.edge_index, **extra)
            self.history_widths = [h.size(1) for h in history]
            flat = torch.cat(history, dim=-1).cpu()
            for g, graph in enumerate(batch.to_data_list()):
                start, end = int(batch.ptr[g]), int(batch.ptr[g + 1])
                item = Data(history=flat[start:end], num_nodes=end - start)
                for key in keys:
                    if graph.get(key) is not None:
                        item[key] = graph[key].cpu()
                cached.append(item)
        return cached

    def split_history(
        self, history: Tensor, widths: Optional[Sequence[int]] = None
    ) -> list[Tensor]:
        """Splits a cached ``[N, sum F_l]`` history into ``[N, F_l]`` tensors
        (``widths`` defaults to those :meth:`cache_history` recorded)."""
        widths = widths if widths is not None else self.history_widths
        if widths is None:
            raise ValueError("`widths` is needed: no cache_history() call recorded them")
        if history.dim() != 2 or history.size(1) != sum(widths):
            raise ValueError(
                f"`history` must be [N, {sum(widths)}] (the concatenated widths {list(widths)}),"
                f" got shape {tuple(history.shape)}"
            )
        return list(history.split(list(widths), dim=1))

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.convs[0]}, num_layers={self.num_layers}, "
            f"include_input={self.include_input})"
        )


def _forward_parameters(module: torch.nn.Module) -> Optional[set[str]]:
    """Keyword names ``module.forward`` accepts (None if it takes ``**kwargs``)."""
    params = inspect.signature(module.forward).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params}

