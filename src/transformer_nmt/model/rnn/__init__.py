"""The RNN encoder-decoder with additive attention (Bahdanau, Cho and Bengio, 2015; "RNNsearch").

The system the Transformer set out to replace, behind the same `EncoderDecoder` interface:
- a bidirectional RNN encoder whose annotations h_j = [->h_j; <-h_j] concatenate the forward and
  backward states;
- a decoder RNN, s_i = f(s_{i-1}, y_{i-1}, c_i), started from s_0 = tanh(W_s <-h_1);
- the context c_i = sum_j alpha_ij h_j, alpha_ij = softmax_j(e_ij) over the real source
  positions, e_ij = v_a^T tanh(W_a s_{i-1} + U_a h_j);
- the paper's deep output layer with maxout (its appendix A.2.2): t_i = maxout(U_o s_i +
  V_o E y_{i-1} + C_o c_i), p(y_i) = softmax(W_o t_i). Maxout keeps the larger of each pair of
  units; t_i has embed_dim units so that W_o can be the target embedding matrix.

The cell is a GRU by default: the paper's "gated hidden unit" is the GRU (Cho et al., 2014),
which matches the LSTM in translation quality with three gates instead of four, so fewer
parameters and faster steps on a CPU. `cell="lstm"` switches both encoder and decoder.

Read in this order: config (its settings) -> encoder (the bidirectional RNN) -> attention (the
alignment model) -> model (the decoder, the deep output layer and the incremental cache).
"""

from transformer_nmt.model.rnn.attention import AdditiveAttention
from transformer_nmt.model.rnn.config import RNNConfig
from transformer_nmt.model.rnn.model import RNNAttention

__all__ = ["AdditiveAttention", "RNNAttention", "RNNConfig"]
