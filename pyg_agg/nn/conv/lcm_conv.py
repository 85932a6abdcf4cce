"""GIN-style convolution around the learnable commutative monoid aggregator."""
from __future__ import annotations

from collections.abc import Callable
from typing import Optional, Union

import torch
from torch import Tensor
from torch.nn import Linear, ReLU, Sequential
from torch_geometric.nn.conv import MessagePassing
from torch_geometric.nn.inits import reset
from torch_geometric.typing import Adj, OptPairTensor, Size

from pyg_agg.nn.aggr.lcm import LCMAggregation


class LCMConv(MessagePassing):
    r"""A GIN-style convolution whose sum is replaced by a learnable
    commutative monoid (`"Learnable Commutative Monoids for Graph Neural
    Networks" <https://arxiv.org/abs/2212.08541>`_, Ong & Veličković, 2022):

    .. math::
        \mathbf{x}^{\prime}_i = h_{\mathbf{\Theta}} \Big( (1 + \epsilon)
        \cdot \mathbf{x}_i + \bigoplus_{j \in \mathcal{N}(i)} \sigma(\mathbf{W}
        \mathbf{x}_j + \mathbf{b}) \Big)

    where :math:`\bigoplus` is :class:`pyg_agg.nn.LCMAggregation` (an exact
    per-neighbourhood balanced tree of a learnt commutative operator) and
    :math:`h_{\mathbf{\Theta}}` an MLP.

    Args:
        in_channels (int): Size of each input sample.
        out_channels (int): Size of each output sample.
        nn (torch.nn.Module, optional): The network :math:`h_{\mathbf{\Theta}}`
            mapping ``[-1, in_channels]`` to ``[-1, out_channels]``; by default
            ``Linear -> ReLU -> Linear``. (default: :obj:`None`)
        eps (float, optional): (Initial) :math:`\epsilon`. (default: :obj:`0.`)
        train_eps (bool, optional): If set to :obj:`True`, :math:`\epsilon`
            is trainable. (default: :obj:`False`)
        project (bool, optional): Project messages with
            :math:`\sigma(\mathbf{W} \cdot + \mathbf{b})` before aggregation.
            (default: :obj:`True`)
        operator (str or callable, optional): The binary operator of the
            aggregator, see :class:`pyg_agg.nn.LCMAggregation`.
            (default: :obj:`"gru"`)
        learn_identity (bool, optional): Learnable identity element for nodes
            without neighbours (else zeros). (default: :obj:`False`)
        **kwargs (optional): Additional arguments of
            :class:`torch_geometric.nn.conv.MessagePassing` (not ``aggr``).

    Shapes:
        - **input:** node features :math:`(|\mathcal{V}|, F_{in})` or
          :math:`((|\mathcal{V_s}|, F_{in}), (|\mathcal{V_t}|, F_{in}))` if
          bipartite, edge indices :math:`(2, |\mathcal{E}|)` in any order
        - **output:** node features :math:`(|\mathcal{V}|, F_{out})` or
          :math:`(|\mathcal{V}_t|, F_{out})` if bipartite
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        nn: Optional[Callable] = None,
        eps: float = 0.0,
        train_eps: bool = False,
        project: bool = True,
        operator: Union[str, Callable[[Tensor, Tensor], Tensor]] = "gru",
        learn_identity: bool = False,
        **kwargs,
    ) -> None:
        if "aggr" in kwargs:
            raise ValueError("`aggr` cannot be set: LCMConv always aggregates with "
                             "LCMAggregation")
        if not isinstance(out_channels, int) or out_channels <= 0:
            raise ValueError(f"`out_channels` must be a positive integer, got {out_channels!r}")
        aggr = LCMAggregation(in_channels, in_channels, project=project,
                              operator=operator, learn_identity=learn_identity)
        super().__init__(aggr=aggr, **kwargs)
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.nn = nn if nn is not None else Sequential(
            Linear(in_channels, out_channels), ReLU(), Linear(out_channels, out_channels))
        self.initial_eps = eps
        if train_eps:
            self.eps = torch.nn.Parameter(torch.empty(1))
        else:
            self.register_buffer("eps", torch.empty(1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        super().reset_parameters()
        reset(self.nn)
        self.eps.data.fill_(self.initial_eps)

    def forward(
        self,
        x: Union[Tensor, OptPairTensor],
        edge_index: Adj,
        size: Size = None,
    ) -> Tensor:
        if isinstance(x, Tensor):
            x = (x, x)
        out = self.propagate(edge_index, x=x, size=size)
        x_dst = x[1]
        if x_dst is not None:
            out = out + (1 + self.eps) * x_dst
        return self.nn(out)

    def message(self, x_j: Tensor) -> Tensor:
        return x_j

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, "
                f"{self.out_channels}, aggr={self.aggr_module})")
