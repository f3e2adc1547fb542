import torch

from transformer_nmt.model.masks import causal_mask, padding_mask


def test_padding_mask_is_true_at_real_tokens():
    tokens = torch.tensor([[5, 6, 0], [7, 0, 0]])
    mask = padding_mask(tokens, pad_id=0)
    assert mask.shape == (2, 1, 1, 3)
    assert mask[:, 0, 0].tolist() == [[True, True, False], [True, False, False]]


def test_causal_mask_is_lower_triangular():
    mask = causal_mask(4)
    assert mask.shape == (1, 1, 4, 4) and mask.dtype == torch.bool
    for i in range(4):
        assert mask[0, 0, i].tolist() == [j <= i for j in range(4)]
