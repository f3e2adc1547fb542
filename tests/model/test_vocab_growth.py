"""A model grown to a larger vocabulary: old weights exact, new rows as a new model draws them,
and the old tokens scored as before."""

import pytest
import torch

from transformer_nmt.model import FAMILIES
from transformer_nmt.model.vocab_growth import PER_TOKEN, with_vocab_size

VOCAB, GROWN = 50, 57
TINY = {
    "transformer": dict(N=1, d_model=16, d_ff=32, h=2, dropout=0.0),
    "rnn_attention": dict(embed_dim=16, hidden_size=16, dropout=0.0),
}
CASES = [
    ("transformer", dict(tie_embeddings="all")),
    ("transformer", dict(tie_embeddings="none", output_bias=True)),
    ("rnn_attention", dict(tie_embeddings="decoder")),
]


@pytest.mark.parametrize("family, settings", CASES, ids=["tied", "untied_bias", "rnn"])
def test_growth_keeps_old_rows_draws_new_ones_as_a_new_model_and_scores_old_tokens_alike(
    family, settings
):
    build = FAMILIES[family].model
    torch.manual_seed(0)
    model = build(VOCAB, 0, **TINY[family], **settings).eval()
    torch.manual_seed(1)
    grown = with_vocab_size(model, GROWN).eval()
    torch.manual_seed(1)
    fresh = build(GROWN, 0, **TINY[family], **settings)

    assert grown.config.vocab_size == GROWN
    old, new, drawn = model.state_dict(), grown.state_dict(), fresh.state_dict()
    for name, weight in new.items():
        if name.startswith(PER_TOKEN):
            assert torch.equal(weight[:VOCAB], old[name]), name
            assert torch.equal(weight[VOCAB:], drawn[name][VOCAB:]), name
        else:
            assert torch.equal(weight, old[name]), name
    src = torch.randint(3, VOCAB, (2, 5))
    tgt = torch.randint(3, VOCAB, (2, 4))
    with torch.no_grad():
        torch.testing.assert_close(grown(src, tgt)[..., :VOCAB], model(src, tgt))


def test_growth_refuses_to_drop_tokens():
    model = FAMILIES["transformer"].model(VOCAB, 0, **TINY["transformer"])
    with pytest.raises(ValueError, match="vocab_size=40 would drop tokens of 50"):
        with_vocab_size(model, 40)
