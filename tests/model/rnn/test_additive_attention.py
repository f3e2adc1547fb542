import torch

from transformer_nmt.model.rnn.attention import AdditiveAttention


def test_additive_attention_scores_each_source_position():
    torch.manual_seed(0)
    attention = AdditiveAttention(query_size=5, key_size=6, attention_dim=4)
    query, memory = torch.randn(2, 5), torch.randn(2, 3, 6)
    mask = torch.tensor([[True, True, True], [True, True, False]])
    context, weights = attention(query, attention.keys(memory), memory, mask)
    for b in range(2):
        e = [
            (attention.v_a.weight[0] * torch.tanh(attention.W_a(query[b]) + attention.U_a(h))).sum()
            for h in memory[b, : mask[b].sum()]
        ]
        alpha = torch.stack(e).softmax(0)
        torch.testing.assert_close(weights[b, : len(alpha)], alpha)
        torch.testing.assert_close(context[b], alpha @ memory[b, : len(alpha)])
    assert weights[1, 2] == 0
