import torch

from transformer_nmt.model.embeddings import Embeddings


def test_embeddings_are_scaled_by_sqrt_d_model():
    emb = Embeddings(vocab_size=10, d_model=16, pad_id=0)
    tokens = torch.tensor([[3, 4, 0]])
    torch.testing.assert_close(emb(tokens), emb.weight[tokens] * 4.0)
    assert emb.weight is emb.lut.weight
