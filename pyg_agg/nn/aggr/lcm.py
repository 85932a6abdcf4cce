"""Learnable commutative monoid aggregation as an exact per-neighbourhood tree."""
from __future__ import annotations

from collections.abc import Callable
from typing import Optional, Union

import torch
from torch import Tensor
from torch.nn import GRUCell, Linear, Module, Parameter, ReLU, Sequential
from torch_geometric.nn.aggr import Aggregation

from pyg_agg.ops import balanced_tree_reduce

BinaryOperator = Callable[[Tensor, Tensor], Tensor]
OPERATORS = ("gru", "mlp")


class LCMAggregation(Aggregation):
    r"""The Learnable Commutative Monoid aggregation from the `"Learnable
    Commutative Monoids for Graph Neural Networks"
    <https://arxiv.org/abs/2212.08541>`_ paper (Ong & Veličković, LoG 2022).

    A learnt binary operator :math:`\oplus`, commutative by construction,

    .. math::
        a \oplus b = \tfrac{1}{2}\big(g(a, b) + g(b, a)\big),

    reduces every neighbourhood with a balanced binary tree of depth
    :math:`\lceil \log_2 d_i \rceil`:

    .. math::
        \mathbf{h}_i = \bigoplus_{j \in \mathcal{N}(i)} \sigma(\mathbf{W}
        \mathbf{x}_j + \mathbf{b}), \qquad
        \mathbf{h}_i = \mathbf{e} \text{ if } \mathcal{N}(i) = \emptyset.

    Unlike PyG's :class:`torch_geometric.nn.aggr.LCMAggregation`, which pads
    every neighbourhood with zeros up to the batch's maximum degree, each
    neighbourhood is reduced on its own: elements are stably sorted by
    :obj:`index` (or taken in CSR order from :obj:`ptr`), and at every level
    elements :math:`2k` and :math:`2k+1` of each segment are combined while an
    odd last element moves up unchanged. All pairs of all segments in a level
    go through :math:`\oplus` together, so the work is :math:`\mathcal{O}(|E|)`
    operator applications, the memory :math:`\mathcal{O}(|E| F)`, and a node's
    output does not depend on what else is in the batch. When every node has
    the same degree and :obj:`index` is sorted, the result equals PyG's.

    Levels with more than :obj:`chunk_size` pairs are evaluated in chunks whose
    activations are recomputed in the backward pass (gradient checkpointing),
    which bounds the memory on graphs with hub nodes. The tree is
    :func:`pyg_agg.ops.balanced_tree_reduce` with :meth:`combine` as the
    operator.

    Args:
        in_channels (int): Size of each input sample.
        out_channels (int): Size of each output sample.
        project (bool, optional): If set to :obj:`True`, applies a linear
            transformation followed by ReLU before aggregation; required when
            :obj:`in_channels != out_channels`. (default: :obj:`True`)
        operator (str or callable, optional): The binary operator:
            :obj:`"gru"` (a :class:`~torch.nn.GRUCell` :math:`g`, as in PyG),
            :obj:`"mlp"` (a two-layer MLP :math:`g` on :math:`[a \Vert b]`),
            or any callable :math:`(a, b) \mapsto a \oplus b` on
            :math:`[P, F]` tensors, used as given (it should be commutative).
            (default: :obj:`"gru"`)
        learn_identity (bool, optional): If set to :obj:`True`, empty
            neighbourhoods receive a learnable identity element
            :math:`\mathbf{e}` (initialised to zeros); otherwise zeros.
            (default: :obj:`False`)
        chunk_size (int, optional): Number of pairs evaluated per operator
            call before a level is chunked and recomputed in backward;
            :obj:`None` evaluates every level in one call without
            recomputation. (default: :obj:`8192`)

    Shapes:
        - **input:** :math:`(|\mathcal{E}|, F_{in})`, :obj:`index`
          :math:`(|\mathcal{E}|)` in any order or :obj:`ptr`
          :math:`(|\mathcal{V}| + 1)`
        - **output:** :math:`(|\mathcal{V}|, F_{out})`
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        project: bool = True,
        operator: Union[str, BinaryOperator] = "gru",
        learn_identity: bool = False,
        chunk_size: Optional[int] = 8192,
    ) -> None:
        super().__init__()
        for name, value in (("in_channels", in_channels), ("out_channels", out_channels)):
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"`{name}` must be a positive integer, got {value!r}")
        if in_channels != out_channels and not project:
            raise ValueError(
                f"Inputs of '{self.__class__.__name__}' must be projected if "
                f"`in_channels != out_channels` (got {in_channels} and {out_channels})"
            )
        if isinstance(operator, str) and operator not in OPERATORS:
            raise ValueError(f"`operator` must be one of {OPERATORS} or a callable, "
                             f"got {operator!r}")
        if not isinstance(operator, str) and not callable(operator):
            raise TypeError(f"`operator` must be a string or a callable, "
                            f"got {type(operator).__name__}")
        if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
            raise ValueError(f"`chunk_size` must be a positive integer or None, "
                             f"got {chunk_size!r}")

        self.in_channels = in_channels
        self.out_channels = out_channels
        self.project = project
        self.learn_identity = learn_identity
        self.chunk_size = chunk_size

        self.lin = Linear(in_channels, out_channels) if project else None
        if operator == "gru":
            self.gru_cell = GRUCell(out_channels, out_channels)
        elif operator == "mlp":
            self.mlp = Sequential(
                Linear(2 * out_channels, out_channels),
                ReLU(),
                Linear(out_channels, out_channels),
            )
        else:
            # An nn.Module operator is registered as a submodule by assignment.
            self.custom_operator = operator
        self.operator = operator if isinstance(operator, str) else "custom"
        self.identity = Parameter(torch.zeros(out_channels)) if learn_identity else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.lin is not None:
            self.lin.reset_parameters()
        if self.operator == "gru":
            self.gru_cell.reset_parameters()
        elif self.operator == "mlp":
            self.mlp[0].reset_parameters()
            self.mlp[2].reset_parameters()
        elif hasattr(self.custom_operator, "reset_parameters"):
            self.custom_operator.reset_parameters()
        if self.identity is not None:
            torch.nn.init.zeros_(self.identity)

    def combine(self, a: Tensor, b: Tensor) -> Tensor:
        r"""The binary operator :math:`a \oplus b` on rows of ``[P, F_out]``."""
        if self.operator == "custom":
            return self.custom_operator(a, b)
        # One call evaluates g(a, b) and g(b, a) for every pair.
        first = torch.cat([a, b])
        second = torch.cat([b, a])
        if self.operator == "gru":
            out = self.gru_cell(first, second)
        else:
            out = self.mlp(torch.cat([first, second], dim=1))
        return out.view(2, -1, self.out_channels).mean(dim=0)

    def associativity_loss(self, x: Tensor, num_triples: int = 256) -> Tensor:
        r"""A regulariser encouraging :math:`\oplus` to be associative:

        .. math::
            \frac{1}{T}\sum_{t=1}^{T} \big\Vert (a_t \oplus b_t) \oplus c_t
            - a_t \oplus (b_t \oplus c_t) \big\Vert_2^2

        over :obj:`num_triples` triples sampled with replacement from the rows
        of :obj:`x` (``[*, F_in]``, e.g. the messages being aggregated; they
        are projected first when :obj:`project=True`).
        """
        if x.dim() != 2 or x.size(0) == 0 or x.size(1) != self.in_channels:
            raise ValueError(f"`x` must have shape [num_rows > 0, {self.in_channels}], "
                             f"got {tuple(x.shape)}")
        if not isinstance(num_triples, int) or num_triples <= 0:
            raise ValueError(f"`num_triples` must be a positive integer, got {num_triples!r}")
        x = self._project(x)
        a, b, c = x[torch.randint(x.size(0), (3, num_triples), device=x.device)]
        left = self.combine(self.combine(a, b), c)
        right = self.combine(a, self.combine(b, c))
        return (left - right).pow(2).sum(dim=-1).mean()

    def forward(
        self,
        x: Tensor,
        index: Optional[Tensor] = None,
        ptr: Optional[Tensor] = None,
        dim_size: Optional[int] = None,
        dim: int = -2,
        max_num_elements: Optional[int] = None,
    ) -> Tensor:
        r"""Reduces the rows of :obj:`x` that share an :obj:`index` (or a
        :obj:`ptr` segment). :obj:`max_num_elements` is accepted for
        compatibility with PyG and unused: nothing is padded."""
        self.assert_two_dimensional_input(x, dim)
        if x.size(1) != self.in_channels:
            raise ValueError(f"`x` must have {self.in_channels} features (in_channels), "
                             f"got shape {tuple(x.shape)}")
        # The tree projects the rows it reads, so the [E, F_out] projection is
        # never stored whole (chunked levels recompute it in backward).
        parameters = self.operator_parameters()
        if self.lin is not None:
            parameters += list(self.lin.parameters())
        return balanced_tree_reduce(
            x, self.combine, index, ptr, dim_size,
            empty_value=None if self.identity is None else self.identity.to(x.dtype),
            chunk_size=self.chunk_size, parameters=parameters,
            leaf=None if self.lin is None else self._project)

    def _project(self, x: Tensor) -> Tensor:
        """ReLU(W x + b) when ``project``, else ``x``."""
        return x if self.lin is None else self.lin(x).relu()

    def operator_parameters(self) -> list[Parameter]:
        """The parameters of the binary operator (not of the projection)."""
        if self.operator == "gru":
            return list(self.gru_cell.parameters())
        if self.operator == "mlp":
            return list(self.mlp.parameters())
        if isinstance(self.custom_operator, Module):
            return list(self.custom_operator.parameters())
        return []

    def __repr__(self) -> str:
        options = ""
        if self.operator != "gru":
            options += f", operator={self.operator!r}"
        if self.learn_identity:
            options += ", learn_identity=True"
        return (f"{self.__class__.__name__}({self.in_channels}, "
                f"{self.out_channels}, project={self.project}{options})")

