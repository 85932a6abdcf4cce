"""Degree-scaled multi-aggregation (PNA), drop-in for PyG's ``DegreeScalerAggregation``."""
from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Optional, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.nn.aggr import Aggregation

from pyg_agg.ops import (
    DegreeGroups,
    check_index,
    degree_groups,
    multi_aggregate,
    scale_stacked,
    stacked_multi_aggregate,
    stacked_statistics,
)

AGGREGATORS = ("mean", "sum", "min", "max", "var", "std", "moment3", "moment4", "moment5")
SCALERS = ("identity", "amplification", "attenuation", "linear", "inverse_linear")
STD_MODES = ("pyg", "eps")
# Statistic of `multi_aggregate` behind each aggregator (moments need the mean).
_BASE_STAT = {"mean": "mean", "sum": "sum", "min": "min", "max": "max", "var": "var",
              "std": "std", "moment3": "mean", "moment4": "mean", "moment5": "mean"}
# Scalers divided by the average log-degree / the average degree of `deg`.
_LOG_SCALERS = ("amplification", "attenuation")
_LIN_SCALERS = ("linear", "inverse_linear")
# `scaled_linear` groups the nodes by degree when the batch has at most this many
# distinct degrees (one small matmul each) and on average this many nodes per degree
# (see `DegreeScalerAggregation.degree_groups`).
_MAX_DEGREE_GROUPS = 64
_MIN_GROUP_ROWS = 16
# The dtypes that `torch.nn.functional.grouped_mm` takes (float64 is not one).
_GROUPED_MM_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _tower_matmul(rows: Tensor, matrix: Tensor) -> Tensor:
    """``[R, T, K] x [T, O, K] -> [R, T, O]``; one plain matmul for one tower."""
    if matrix.size(0) == 1:
        return (rows.reshape(rows.size(0), -1) @ matrix[0].T).unsqueeze(1)
    return torch.einsum("ntk,tok->nto", rows, matrix)


def _grouped_matmul(rows: Tensor, matrices: Tensor, groups: DegreeGroups) -> Tensor:
    """``[R, T, K]`` rows in groups (``groups.sizes``), each group times its own
    ``[T, O, K]`` matrix of ``matrices`` ``[D, T, O, K]``: ``[R, T, O]``.

    One ``grouped_mm`` where it applies (one tower, float32 and below, rows
    and outputs in multiples of 16 bytes): no split of the rows, and no
    concatenation of the groups' outputs or of their gradients (7-9% of a
    PNAConv step on molecules). Elsewhere one matmul per group: float64, odd
    widths, and towers, whose strided per-tower rows made ``grouped_mm`` 12%
    slower there.
    """
    row_bytes = [size * rows.element_size() for size in (rows.size(-1), matrices.size(-2))]
    if (rows.size(1) == 1 and rows.dtype in _GROUPED_MM_DTYPES
            and all(b % 16 == 0 for b in row_bytes)):
        out = F.grouped_mm(rows.view(rows.size(0), -1), matrices[:, 0].transpose(1, 2),
                           offs=groups.ends)
        return out.unsqueeze(1)
    # split/unbind, not slices: a slice's backward zero-fills a full-size gradient
    return torch.cat([_tower_matmul(group, matrix) for group, matrix in
                      zip(rows.split(groups.sizes), matrices.unbind(0), strict=True)])


def parse_names(value: Union[str, Iterable[str]], known: tuple[str, ...], arg: str) -> list[str]:
    """One name or several, checked against ``known``; errors name the argument ``arg``."""
    names = [value] if isinstance(value, str) else list(value)
    if not names:
        raise ValueError(f"`{arg}` must name at least one of {known}")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"Unknown {arg} {unknown}: expected some of {known}")
    return names


def _degree_averages(deg: Optional[Tensor], scalers: list[str]) -> tuple[float, float]:
    """Average degree and average log(degree + 1) of a degree histogram.

    Returns ``(1, 1)`` when ``deg`` is None and only the identity scaler is used.
    """
    needs_deg = [s for s in scalers if s != "identity"]
    hint = ("pass the in-degree histogram of the training graphs, e.g. "
            "`deg=PNAConv.get_degree_histogram(train_dataset)`")
    if deg is None:
        if needs_deg:
            raise ValueError(f"`deg` is required by the scalers {needs_deg}: {hint}")
        return 1.0, 1.0
    if not isinstance(deg, Tensor) or deg.dim() != 1:
        raise ValueError(f"`deg` must be a 1-D tensor (histogram of in-degrees): {hint}")
    deg = deg.detach().to(torch.float64, copy=True).cpu()
    if not bool(deg.isfinite().all()):
        raise ValueError(f"`deg` is a histogram and must hold finite counts, got NaN or inf: {hint}")
    if bool((deg < 0).any()):
        raise ValueError("`deg` is a histogram and must not contain negative counts")
    total = float(deg.sum())
    if total <= 0:
        if needs_deg:
            raise ValueError(f"`deg` is empty or all zero, but the scalers {needs_deg} "
                             f"need it: {hint}")
        return 1.0, 1.0
    bins = torch.arange(deg.numel(), dtype=torch.float64)
    avg_lin = float((bins * deg).sum()) / total
    avg_log = float(((bins + 1).log() * deg).sum()) / total
    for names, avg, what in ((_LOG_SCALERS, avg_log, "log(degree + 1)"),
                             (_LIN_SCALERS, avg_lin, "degree")):
        used = [s for s in scalers if s in names]
        if used and avg == 0:
            raise ValueError(f"`deg` only counts isolated nodes, so the average {what} "
                             f"is 0 and the scalers {used} would divide by zero")
    return avg_lin, avg_log


class DegreeScalerAggregation(Aggregation):
    r"""Several aggregators combined with degree scalers, from the
    `"Principal Neighbourhood Aggregation for Graph Nets"
    <https://arxiv.org/abs/2004.05718>`_ paper (Corso et al., NeurIPS 2020);
    a drop-in for :class:`torch_geometric.nn.aggr.DegreeScalerAggregation`.

    .. math::
        \bigoplus_{j \in \mathcal{N}(i)} \mathbf{x}_j =
        \big\Vert_{s \in \text{scalers}} \; s(d_i) \cdot
        \big\Vert_{a \in \text{aggregators}} \; a\big(\{\mathbf{x}_j\}\big),
        \qquad \text{amplification}(d) = \frac{\log(d + 1)}{\delta},\;
        \text{attenuation}(d) = \frac{\delta}{\log(d + 1)},

    with :math:`d_i` the in-degree and :math:`\delta` the mean of
    :math:`\log(d + 1)` over the training graphs (from ``deg``); ``linear`` and
    ``inverse_linear`` use :math:`d / \delta_{lin}` and its inverse, with
    :math:`\delta_{lin}` the mean degree. Degrees below 1 are clamped to 1 where
    they would divide, as in PyG.

    Output layout, buffers (``avg_deg_lin``, ``avg_deg_log``) and values are
    PyG's, so state dicts load both ways. Differences: all aggregators come
    from one :func:`pyg_agg.ops.stacked_multi_aggregate` pass (one fused native
    pass, then one epilogue that writes the scaled output, each way) with a
    backward that keeps only the messages, and a numerically stable
    variance; the paper's ``moment3..5`` aggregators are available; a single
    scaler may be given as a string
    whatever ``aggr`` is (PyG tests ``aggr`` for that, so ``scaler="identity"``
    with a list of aggregators fails there).

    Args:
        aggr (str or List[str]): Aggregator names: ``"mean"``, ``"sum"``,
            ``"min"``, ``"max"``, ``"var"``, ``"std"``, ``"moment3"``,
            ``"moment4"``, ``"moment5"``. ``Aggregation`` instances are not
            accepted (they would bypass the fused kernel).
        scaler (str or List[str]): Scaler names: ``"identity"``,
            ``"amplification"``, ``"attenuation"``, ``"linear"``,
            ``"inverse_linear"``.
        deg (torch.Tensor, optional): Histogram of the training graphs'
            in-degrees (see :meth:`pyg_agg.nn.PNAConv.get_degree_histogram`). Required
            unless the only scaler is ``"identity"``.
        train_norm (bool, optional): Make the degree normalisers trainable.
            (default: :obj:`False`)
        aggr_kwargs (List[Dict[str, Any]], optional): Accepted for PyG
            compatibility; must be empty (the named aggregators take no
            arguments). (default: :obj:`None`)
        std_mode (str, optional): ``"pyg"`` (default, PyG's
            :math:`\sqrt{\max(\sigma^2, \epsilon)}`, 0 where
            :math:`\le \sqrt{\epsilon}`) or ``"eps"`` (the paper's
            :math:`\sqrt{\mathrm{relu}(\sigma^2) + \epsilon}`).
        eps (float, optional): The :math:`\epsilon` above. (default: ``1e-5``)

    Shapes:
        - **input:** ``x`` :math:`(*, |\mathcal{E}|, *, F)` with
          ``index`` :math:`(|\mathcal{E}|)` along ``dim``
        - **output:** :math:`(*, |\mathcal{V}|, *, S \cdot A \cdot F)`,
          scaler-major, then aggregator, then channel (PyG's order)
    """

    def __init__(self, aggr: Union[str, list[str]], scaler: Union[str, list[str]],
                 deg: Optional[Tensor] = None, train_norm: bool = False,
                 aggr_kwargs: Optional[list[dict[str, Any]]] = None,
                 std_mode: str = "pyg", eps: float = 1e-5):
        super().__init__()
        if isinstance(aggr, Aggregation):
            raise ValueError(f"`aggr` must be aggregator names from {AGGREGATORS}, got the "
                             f"module {aggr!r}")
        if aggr_kwargs and any(aggr_kwargs):
            raise ValueError(f"`aggr_kwargs` must be empty: the aggregators {AGGREGATORS} "
                             f"take no arguments, got {aggr_kwargs!r}")
        if std_mode not in STD_MODES:
            raise ValueError(f"`std_mode` must be one of {STD_MODES}, got {std_mode!r}")
        self.aggregators = parse_names(aggr, AGGREGATORS, "aggr")
        self.scalers = parse_names(scaler, SCALERS, "scaler")
        self.std_mode = std_mode
        self.eps = eps
        self.init_avg_deg_lin, self.init_avg_deg_log = _degree_averages(deg, self.scalers)
        if train_norm:
            self.avg_deg_lin = torch.nn.Parameter(torch.empty(1))
            self.avg_deg_log = torch.nn.Parameter(torch.empty(1))
        else:
            self.register_buffer("avg_deg_lin", torch.empty(1))
            self.register_buffer("avg_deg_log", torch.empty(1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.avg_deg_lin.data.fill_(self.init_avg_deg_lin)
        self.avg_deg_log.data.fill_(self.init_avg_deg_log)

    def statistics(self, msg: Tensor, index: Tensor, dim_size: int) -> tuple[Tensor, Tensor]:
        """Aggregates ``msg`` (``[E, C]``) at ``index``.

        Returns every aggregator stacked, ``[N, A, C]``, and the in-degree ``[N]``.
        """
        stacked, count = stacked_multi_aggregate(msg, index, dim_size, self._base_statistics(),
                                                 std_mode=self.std_mode, eps=self.eps)
        moment_slots = [(slot, int(a[-1])) for slot, a in enumerate(self.aggregators)
                        if a.startswith("moment")]
        if moment_slots:
            # Paper: M_n = sign(m) (|m| + eps)^(1/n), m = E[(x - mean)^n]; one more
            # pass. A moment's slot holds the mean (its base statistic) until here.
            centred = msg - stacked[:, moment_slots[0][0]].index_select(0, index)
            orders = [n for _, n in moment_slots]
            powers = torch.cat([centred.pow(n) for n in orders], dim=-1)
            moments = multi_aggregate(powers, index, dim_size, stats=("mean",))["mean"]
            slots = list(stacked.unbind(1))
            for (slot, n), m in zip(moment_slots, moments.split(msg.size(-1), dim=-1), strict=True):
                slots[slot] = m.sign() * (m.abs() + self.eps).pow(1.0 / n)
            stacked = torch.stack(slots, dim=1)
        return stacked, count

    @property
    def gathers(self) -> bool:
        """Whether :meth:`gathered_statistics` serves these aggregators: not
        the moments (they need the centred messages, a second pass over the
        edges), and at least one aggregator that the shift moves; with only
        var/std the shift's parameters would get no gradient at all, where
        the materialised form gives them a zero one (DDP needs one)."""
        return (not self._has_moments
                and any(a in ("mean", "sum", "min", "max") for a in self.aggregators))

    def gathered_statistics(self, src: Tensor, ptr: Tensor, col: Tensor,
                            edge_term: Optional[Tensor], shift: Optional[Tensor] = None,
                            groups: Optional[DegreeGroups] = None) -> tuple[Tensor, Tensor]:
        r""":meth:`statistics` of the messages
        :math:`x_e = \mathrm{src}[\mathrm{col}_e] + \mathrm{edge\_term}_e +
        \mathrm{shift}_i` of CSR row :math:`i` (``ptr``), without building them
        (:func:`pyg_agg.ops.stacked_statistics`; ``None``: no term, no shift).
        Only when :attr:`gathers`. With ``groups`` (from :meth:`degree_groups`)
        the stacked rows come out in ``groups.order``, as :meth:`scaled_linear`
        takes them; the counts stay in node order.
        """
        return stacked_statistics(src, ptr, col, edge_term, stats=self._base_statistics(), shift=shift,
                                  std_mode=self.std_mode, eps=self.eps,
                                  row_order=None if groups is None else groups.order)

    def _base_statistics(self) -> list[str]:
        """The statistic behind each aggregator, in order (a moment's: the mean)."""
        return [_BASE_STAT[a] for a in self.aggregators]

    def scales(self, count: Tensor, dtype: torch.dtype) -> Tensor:
        """The ``[N, S]`` factor of each scaler; degrees below 1 are clamped to 1
        where they would divide (PyG does the same)."""
        deg = count.to(dtype)
        clamped = deg.clamp(min=1)
        factors = {
            "identity": lambda: torch.ones_like(deg),
            "amplification": lambda: (deg + 1).log() / self.avg_deg_log,
            "attenuation": lambda: self.avg_deg_log / (clamped + 1).log(),
            "linear": lambda: deg / self.avg_deg_lin,
            "inverse_linear": lambda: self.avg_deg_lin / clamped,
        }
        return torch.stack([factors[s]() for s in self.scalers], dim=1)

    def degree_groups(self, ptr: Tensor) -> Optional[DegreeGroups]:
        """The nodes of the CSR ``ptr`` grouped by in-degree for
        :meth:`scaled_linear`, or None where it weights every scaler instead:
        one scaler, more than 64 distinct degrees or fewer than 16 nodes per
        degree on average (a power-law graph), off CPU, and under
        ``torch.compile`` (the groups are data-dependent). The grouping is kept
        per graph (:func:`pyg_agg.ops.degree_groups`)."""
        if (len(self.scalers) == 1 or ptr.device.type != "cpu"
                or torch.compiler.is_compiling()):
            return None
        groups = degree_groups(ptr)
        count = groups.degrees.numel()
        if count <= _MAX_DEGREE_GROUPS and count * _MIN_GROUP_ROWS <= ptr.numel() - 1:
            return groups
        return None

    def scaled_linear(self, stacked: Tensor, count: Tensor, weight: Tensor,
                      groups: Optional[DegreeGroups] = None,
                      add: Optional[Tensor] = None) -> Tensor:
        r"""The linear map that follows the scalers, :math:`\sum_s s(d_i)\, W_s a_i`,
        without the ``[N, S * K]`` scaled copy of the aggregates.

        ``stacked`` ``[N, T, K]`` (``T`` towers, ``K`` = aggregators x channels),
        ``count`` the in-degrees ``[N]``, ``weight`` ``[T, S, O, K]`` (the columns of
        scaler ``s``); returns ``[N, T, O]`` in node order, plus ``add`` (``[N, T, O]``)
        when given, in the same pass.

        A scaler depends on its node only through the degree. Given ``groups``
        (:meth:`degree_groups`; ``stacked``'s rows then come in ``groups.order``,
        as :meth:`gathered_statistics` writes them), each group of degree
        :math:`d` is multiplied by one combined matrix
        :math:`M_d = \sum_s s(d)\, W_s`: one matmul per node instead of one per
        scaler, a third of the FLOPs with PNA's three scalers, forward and
        backward. Without, every scaler's product is computed and weighted.
        """
        num_nodes, towers, width = stacked.shape
        num_scalers = weight.size(1)
        if groups is not None:
            # [D, S] x [T, S, O, K] -> [D, T, O, K]: one mm (einsum took 20% longer)
            combined = torch.tensordot(self.scales(groups.degrees, stacked.dtype), weight,
                                       dims=([1], [1]))
            out = _grouped_matmul(stacked, combined, groups)
            if add is None:
                return out.new_empty(out.shape).index_copy(0, groups.order, out)
            return add.index_add(0, groups.order, out)  # back in node order, and added
        per_scaler = _tower_matmul(stacked, weight.reshape(towers, -1, width))
        per_scaler = per_scaler.view(num_nodes, towers, num_scalers, -1)
        if self.scalers == ["identity"]:
            out = per_scaler.squeeze(2)
        else:
            scale = self.scales(count, stacked.dtype).view(num_nodes, 1, num_scalers, 1)
            out = (per_scaler * scale).sum(dim=2)
        return out if add is None else out + add

    def forward(self, x: Tensor, index: Optional[Tensor] = None, ptr: Optional[Tensor] = None,
                dim_size: Optional[int] = None, dim: int = -2) -> Tensor:
        """``x`` ``[..., E, ..., C]`` -> ``[..., N, ..., S * A * C]``."""
        self.assert_index_present(index)
        moved = x.movedim(dim, 0)
        n = check_index(index, moved, 0, dim_size)
        # an explicit width: reshape(0, -1) is ambiguous when there are no messages
        msg = moved.reshape(moved.size(0), math.prod(moved.shape[1:]))
        if self._has_moments:
            stacked, count = self.statistics(msg, index, n)
            out = scale_stacked(stacked, self.scales(count, x.dtype))
        else:  # the scaled copies written by the statistics' epilogue
            out, _ = stacked_multi_aggregate(msg, index, n, self._base_statistics(),
                                             std_mode=self.std_mode, eps=self.eps,
                                             scaler=lambda count: self.scales(count, x.dtype))
        out = out.view(n, len(self.scalers), len(self.aggregators), *moved.shape[1:])
        out = out.movedim((1, 2), (-3, -2))
        return out.reshape(*out.shape[:-3], -1).movedim(0, dim)

    @property
    def _has_moments(self) -> bool:
        return any(a.startswith("moment") for a in self.aggregators)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}()"  # PyG's repr, which its own tests check


__all__ = ["DegreeScalerAggregation", "parse_names"]
