"""Scaled dot-product and multi-head attention (section 3.2)."""

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from transformer_nmt.model.masks import causal_mask
from transformer_nmt.model.transformer.dropout import dropout


def attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout_p: float = 0.0
) -> tuple[Tensor, Tensor]:
    """softmax(Q K^T / sqrt(d_k)) V, written out so that it can return the weights.

    dropout_p: drop this share of the weights before they weigh V; the weights returned are the
    ones before dropout.
    """
    # In place on the product, which no backward reads: no tensor of scores allocated again.
    scores = (q @ k.transpose(-2, -1)).div_(math.sqrt(q.size(-1)))  # (B, h, T_q, T_k)
    if mask is not None:
        # -inf, not a large negative number, so masked weights are exactly 0.
        scores.masked_fill_(~mask, float("-inf"))
    # In fp32 under bf16 autocast too: bf16 weights and their gradient kept a toy task's
    # training loss at 0.33 where fp32's reached 0.002 (tests/test_train.py).
    weights = scores.softmax(dim=-1, dtype=torch.float32).to(v.dtype)
    dropped = dropout(weights, dropout_p, training=True)
    return dropped @ v, weights  # (B, h, T_q, d_v), (B, h, T_q, T_k)


def attention_kernel(
    device_type: str, dtype: torch.dtype, grad: bool, dropout: bool, cached_memory: bool = False
) -> str:
    """The kernel `auto` runs for this device type ("cpu", "cuda"), dtype and direction.

    grad: training (forward and backward) rather than inference. dropout: the weights are
    dropped (`model.attention_dropout`). cached_memory: a decoding step's encoder-decoder
    attention, whose keys and values `MultiHeadAttention` cached laid out for matmuls.
    Measured with experiments/speed/attention_kernels.py; the numbers are in
    experiments/speed/README.md (decoding's in experiments/frontier/README.md).
    """
    if device_type == "cpu" and dtype == torch.float32 and cached_memory:
        # Two batched matmuls over the cached K^T and V beat the fused kernel's GEMMs a head,
        # several times over with a sentence's beams as its queries.
        return "explicit"
    if device_type == "cpu" and dropout:
        # SDPA drops weights with its math backend and one Bernoulli draw per weight on CPUs;
        # the explicit path takes the cheaper mask (dropout.py) and runs faster.
        return "explicit"
    if device_type == "cpu" and grad and dtype == torch.bfloat16:
        # The CPU flash kernel's bf16 backward is slow: the softmax written out trains faster.
        return "explicit"
    # CPU fp32 training: no other kernel beat the fused one. CPU inference: one fused call beats
    # math SDPA's ~10 ops on small decoding steps. CUDA: SDPA picks flash or memory-efficient
    # attention, the right kernels there.
    return "fused"


def scaled_dot_product(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None,
    causal: bool,
    kernel: str,
    dropout_p: float = 0.0,
    cached_memory: bool = False,
) -> Tensor:
    """softmax(Q K^T / sqrt(d_k)) V by one of `config.ATTENTION_KERNELS`; the same function each.

    "fused" is `F.scaled_dot_product_attention` with its own backend choice (on CPU the flash
    attention kernel), "math" the same restricted to its math backend, "explicit" `attention`,
    "auto" the one `attention_kernel` picks. q (B, h, T_q, d_k), k (B, h, T_k, d_k),
    v (B, h, T_k, d_v), mask and causal as for MultiHeadAttention, dropout_p the share of
    weights dropped, cached_memory as for `attention_kernel` -> (B, h, T_q, d_v).
    """
    if kernel == "auto":
        training = torch.is_grad_enabled() and q.requires_grad  # a backward will follow
        kernel = attention_kernel(q.device.type, q.dtype, training, dropout_p > 0, cached_memory)
    if kernel == "explicit":
        mask = causal_mask(q.size(2), q.device) if causal else mask
        return attention(q, k, v, mask, dropout_p)[0]
    sdpa = dict(attn_mask=mask, dropout_p=dropout_p, is_causal=causal)
    if kernel == "math":
        with sdpa_kernel(SDPBackend.MATH):
            return F.scaled_dot_product_attention(q, k, v, **sdpa)
    return F.scaled_dot_product_attention(q, k, v, **sdpa)


class KeyValueCache:
    """A self-attention's keys and values so far, for decoding one step at a time.

    They lie time-major in buffers (capacity, B, h, d) that double when full: a step writes its
    keys and values into the next free slots, where concatenating would copy every earlier one
    again (O(T) a step, O(T^2) a sentence), and attention reads the filled slots as a
    (B, h, T, d) view. A reorder (beam search) copies the filled slots once, contiguously.
    Measured in experiments/frontier/README.md.
    """

    def __init__(self, keys: Tensor | None = None, values: Tensor | None = None, length: int = 0):
        self.keys, self.values, self.length = keys, values, length

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """New positions' k (B, h, T, d_k) and v (B, h, T, d_v) -> all keys and values so far,
        (B, h, length, d_k) and (B, h, length, d_v) views of the buffers."""
        end = self.length + k.size(2)
        if self.keys is None or end > self.keys.size(0):
            self.keys = self._grown(self.keys, k, end)
            self.values = self._grown(self.values, v, end)
        self.keys[self.length : end] = k.permute(2, 0, 1, 3)
        self.values[self.length : end] = v.permute(2, 0, 1, 3)
        self.length = end
        return self.view(self.keys), self.view(self.values)

    def _grown(self, buffer: Tensor | None, new: Tensor, end: int) -> Tensor:
        capacity = max(2 * end, 32)  # a few doublings cover most sentences
        B, h, _, d = new.shape
        grown = new.new_empty(capacity, B, h, d)
        if buffer is not None:
            grown[: self.length] = buffer[: self.length]
        return grown

    def view(self, buffer: Tensor) -> Tensor:
        """(B, h, length, d): the filled slots of a buffer, batch-major."""
        return buffer[: self.length].permute(1, 2, 0, 3)

    def reordered(self, order: Tensor) -> "KeyValueCache":
        """A cache whose batch row i is row `order[i]` of this one; this one is unchanged."""
        if self.keys is None:
            return KeyValueCache()
        copies = []
        for buffer in (self.keys, self.values):
            copy = buffer.new_empty(buffer.size(0), order.numel(), *buffer.shape[2:])
            filled = buffer[: self.length]
            if filled.requires_grad:  # out= records no gradient
                copy[: self.length] = filled.index_select(1, order)
            else:
                torch.index_select(filled, 1, order, out=copy[: self.length])
            copies.append(copy)
        return KeyValueCache(*copies, self.length)


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = Attention(QW^Q_i, KW^K_i, VW^V_i).

    The projections of all heads are one matrix each, and the ones applied to the same input are
    stacked into one matmul: [W^Q; W^K; W^V] (`w_qkv`) for self-attention, where queries, keys and
    values are all the layer input, and [W^K; W^V] (`w_kv`) over the encoder output for
    encoder-decoder attention.

    Args:
        d_model, h, d_k, d_v: sizes as in the paper.
        self_attention: keys and values come from the queries' own sequence; False for
            encoder-decoder attention, whose keys and values come from `memory`.
        kernel: how attention runs without weights, one of `config.ATTENTION_KERNELS`.
        dropout: share of the attention weights dropped in training. Not the paper, which drops
            only sublayer outputs and embedding sums (section 5.4); tensor2tensor's
            attention_dropout, fairseq's --attention-dropout.
    """

    def __init__(
        self,
        d_model: int,
        h: int,
        d_k: int,
        d_v: int,
        self_attention: bool = True,
        kernel: str = "auto",
        dropout: float = 0.0,
    ):
        super().__init__()
        self.h, self.d_k, self.d_v = h, d_k, d_v
        self.self_attention, self.kernel, self.dropout_p = self_attention, kernel, dropout
        # Output widths of the stacked projections: (W^Q,) W^K, W^V.
        self.fused_sizes = [h * d_k, h * d_v]
        if self_attention:
            self.fused_sizes.insert(0, h * d_k)
            self.w_qkv = nn.Linear(d_model, sum(self.fused_sizes))
        else:
            self.w_q = nn.Linear(d_model, h * d_k)
            self.w_kv = nn.Linear(d_model, sum(self.fused_sizes))
        self.w_o = nn.Linear(h * d_v, d_model)

    def reset_parameters(self) -> None:
        """Xavier-uniform per projection, as if W^Q, W^K and W^V were separate matrices."""
        fused = self.w_qkv if self.self_attention else self.w_kv
        for w in (*fused.weight.split(self.fused_sizes), self.w_o.weight):
            nn.init.xavier_uniform_(w)
        if not self.self_attention:
            nn.init.xavier_uniform_(self.w_q.weight)

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None = None,
        mask: Tensor | None = None,
        causal: bool = False,
        need_weights: bool = False,
        cache: KeyValueCache | dict[str, Tensor] | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from x to itself (self-attention) or to memory (encoder-decoder attention).

        Args:
            x: (B, T_q, d_model), the queries' inputs.
            memory: (B, T_k, d_model) keys' and values' inputs of encoder-decoder attention; or
                (B / G, T_k, d_model), rows g * G .. g * G + G - 1 of x reading row g (a
                sentence's beams or samples): they attend as G * T_q queries of one sequence,
                so its keys and values are projected, cached and read once, not G times.
            mask: boolean, True = may attend, broadcastable to (B, h, T_q, T_k) with memory's
                rows (B / G); None = attend all.
            causal: query i attends to keys 0..i only, without a mask tensor: the fused kernel
                skips the future instead of reading a (T, T) mask. Needs T_q == T_k; not with mask.
            need_weights: take the explicit softmax path and return the weights (B, h, T_q, T_k);
                otherwise `self.kernel` runs and the weights are None.
            cache: this module's incremental decoding state, updated in place: self-attention's
                `KeyValueCache`, to which it appends the new keys and values; encoder-decoder
                attention's dict, whose "k" (memory's rows, h, d_k, S: the keys transposed) and
                "v" (memory's rows, h, S, d_v) it projects from memory once and then reuses.

        Returns:
            (B, T_q, d_model) output and the weights or None.
        """
        if self.self_attention:
            q, k, v = self.w_qkv(x).split(self.fused_sizes, dim=-1)
            q, k, v = self._split_heads(q), self._split_heads(k), self._split_heads(v)
            if cache is not None:
                k, v = cache.append(k, v)
        else:
            if cache is not None and "k" in cache:
                k, v = cache["k"].transpose(-2, -1), cache["v"]
            else:
                k, v = self.w_kv(memory).split(self.fused_sizes, dim=-1)
                k, v = self._split_heads(k), self._split_heads(v)
                if cache is not None:
                    # K^T and V contiguous, as every later step's matmuls read them; K^T is
                    # what the cache holds, so that selecting its rows keeps it so.
                    cache["k"], cache["v"] = k.transpose(-2, -1).contiguous(), v.contiguous()
                    k, v = cache["k"].transpose(-2, -1), cache["v"]
            # (B / G, G * T_q, d_model): a memory row's queries, all its rows' together.
            q = self._split_heads(self.w_q(x.reshape(k.size(0), -1, x.size(-1))))
        # q (B, h, T_q, d_k), k (B, h, T_k, d_k), v (B, h, T_k, d_v)
        p = self.dropout_p if self.training else 0.0
        if need_weights:
            mask = causal_mask(q.size(2), q.device) if causal else mask
            out, weights = attention(q, k, v, mask, p)
        else:
            cached_memory = not self.self_attention and cache is not None
            out = scaled_dot_product(q, k, v, mask, causal, self.kernel, p, cached_memory)
            weights = None
        rows, T_q = x.shape[:2]
        out = out.transpose(1, 2).reshape(rows, T_q, self.h * self.d_v)  # heads concatenated
        if weights is not None and weights.size(0) != rows:  # a memory row's queries, split
            weights = weights.unflatten(2, (-1, T_q)).transpose(1, 2).flatten(0, 1)
        return self.w_o(out), weights

    def _split_heads(self, x: Tensor) -> Tensor:
        B, T, _ = x.shape
        return x.view(B, T, self.h, -1).transpose(1, 2)  # (B, T, h*d) -> (B, h, T, d)
