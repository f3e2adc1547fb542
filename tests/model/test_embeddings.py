import torch

from transformer_nmt.model.embeddings import Embeddings


def test_embeddings_are_scaled_by_sqrt_d_model():
    emb = Embeddings(vocab_size=10, d_model=16, pad_id=0)
    tokens = torch.tensor([[3, 4, 0]])
    torch.testing.assert_close(emb(tokens), emb.weight[tokens] * 4.0)
    assert emb.weight is emb.lut.weight


def test_reset_draws_from_n_0_d_model_to_the_minus_half_and_zeroes_padding():
    torch.manual_seed(0)
    emb = Embeddings(vocab_size=2000, d_model=16, pad_id=3)
    emb.reset_parameters()
    assert not emb.weight[3].any()
    real = emb.weight[torch.arange(2000) != 3]
    assert abs(real.std().item() - 16**-0.5) < 0.01 and abs(real.mean().item()) < 0.01
