import itertools
import json
import math

import pytest
import torch
from padding_property import assert_padding_changes_nothing
from torch import nn

from helpers.toy_training import VOCAB_SIZE, toy_batch, train_steps
from transformer_nmt.decoding import beam_search, greedy_search
from transformer_nmt.model import RNNAttention, RNNConfig
from transformer_nmt.model.masks import padding_mask

VOCAB, PAD, BOS, EOS = 50, 0, 1, 2  # as in conftest's tiny models
NEVER = -1  # an EOS id the model cannot emit
TINY = dict(vocab_size=VOCAB, pad_id=PAD, embed_dim=16, hidden_size=24, dropout=0.0)
VARIANTS = [
    {},
    {"cell": "lstm"},
    {"num_layers": 2},
    {"cell": "lstm", "num_layers": 2, "attention_dim": 8, "tie_embeddings": "none"},
]


def make_rnn(seed: int = 0, **overrides) -> RNNAttention:
    """Seeded tiny RNN in eval mode; keyword arguments override TINY."""
    torch.manual_seed(seed)
    return RNNAttention(**{**TINY, **overrides}).eval()


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())  # shared (tied) tensors count once


def expected_parameters(config: RNNConfig) -> int:
    """The parameter count from the paper's equations, independently of the code."""
    V, E, H, A, L = (
        config.vocab_size, config.embed_dim, config.hidden_size, config.attention_dim,
        config.num_layers,
    )  # fmt: skip
    gates = {"gru": 3, "lstm": 4}[config.cell]

    def rnn(n_in: int) -> int:
        return gates * (n_in * H + H * H + 2 * H)  # input and recurrent weights, two biases

    encoder = 2 * (rnn(E) + (L - 1) * rnn(2 * H))  # forward and backward
    decoder = rnn(E + 2 * H) + (L - 1) * rnn(H)
    attention = H * A + (2 * H * A + A) + A  # W_a, U_a with its bias, v_a
    init_state = H * L * H + L * H  # W_s
    deep_output = (H + E + 2 * H) * 2 * E + 2 * E  # U_o, V_o, C_o and a bias
    embeddings = {"all": 1, "decoder": 2, "none": 3}[config.tie_embeddings] * V * E
    return encoder + decoder + attention + init_state + deep_output + embeddings


def tokens(lengths: list[int], seed: int = 0, bos: bool = False) -> torch.Tensor:
    """Random word ids, right-padded to the longest of `lengths`; BOS first if bos=True."""
    g = torch.Generator().manual_seed(seed)
    out = torch.randint(3, VOCAB, (len(lengths), max(lengths)), generator=g)
    for row, length in zip(out, lengths, strict=True):
        row[length:] = PAD
    if bos:
        out[:, 0] = BOS
    return out


# --- parity with references -----------------------------------------------------------------


@torch.no_grad()
def reference_encoder(model: RNNAttention) -> nn.RNNBase:
    """torch's own bidirectional, stacked GRU or LSTM holding a copy of the encoder's weights."""
    c = model.config
    RNN = {"gru": nn.GRU, "lstm": nn.LSTM}[c.cell]
    ref = RNN(c.embed_dim, c.hidden_size, c.num_layers, batch_first=True, bidirectional=True)
    for layer in range(c.num_layers):
        for suffix, rnn in (
            ("", model.encoder.forward_rnns),
            ("_reverse", model.encoder.backward_rnns),
        ):
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                getattr(ref, f"{name}_l{layer}{suffix}").copy_(getattr(rnn[layer], f"{name}_l0"))
    return ref.eval()


@pytest.mark.parametrize("overrides", VARIANTS)
def test_annotations_are_torchs_bidirectional_rnn_on_each_unpadded_sentence(overrides):
    model = make_rnn(**overrides)
    ref = reference_encoder(model)
    src = tokens([7, 4, 6])
    memory = model.encode(src)  # (B, S, 2H)
    assert memory.shape == (3, 7, 2 * 24)
    for row, sentence in zip(memory, src, strict=True):
        sentence = sentence[sentence != PAD][None]  # (1, S_i)
        expected, _ = ref(model.src_embed(sentence))
        torch.testing.assert_close(row[: sentence.size(1)], expected[0], atol=1e-5, rtol=1e-5)


@torch.no_grad()
def reference_decoder(model: RNNAttention, memory: torch.Tensor, tgt_in: list[int]) -> list:
    """Logits and alphas of one unpadded sentence, step by step as the paper writes them."""
    H = model.config.hidden_size
    a = model.attention
    s = torch.tanh(model.init_state(memory[0, H:]))  # s_0 = tanh(W_s <-h_1)
    logits, alphas = [], []
    for y in tgt_in:
        Ey = model.tgt_embed(torch.tensor(y))
        e = torch.stack([a.v_a(torch.tanh(a.W_a(s) + a.U_a(h_j)))[0] for h_j in memory])
        alpha = e.softmax(0)  # (S,)
        c = sum(alpha_j * h_j for alpha_j, h_j in zip(alpha, memory, strict=True))
        s = model.cells[0](torch.cat([Ey, c])[None], s[None])[0]  # s_i = f(s_{i-1}, y_{i-1}, c_i)
        t_tilde = model.deep_output(torch.cat([s, Ey, c]))  # U_o s_i + V_o E y_{i-1} + C_o c_i
        t = torch.maximum(t_tilde[0::2], t_tilde[1::2])  # maxout over pairs
        logits.append(model.generator(t))
        alphas.append(alpha)
    return torch.stack(logits), torch.stack(alphas)


def test_decoder_follows_the_papers_equations():
    model = make_rnn()
    src, tgt = tokens([7, 4]), tokens([5, 3], seed=1, bos=True)
    memory = model.encode(src)
    logits, _, (alphas,) = model.decode(tgt, memory, padding_mask(src, PAD), need_weights=True)
    for b, length, tgt_length in ((0, 7, 5), (1, 4, 3)):
        expected_logits, expected_alphas = reference_decoder(
            model, memory[b, :length], tgt[b, :tgt_length].tolist()
        )
        torch.testing.assert_close(logits[b, :tgt_length], expected_logits, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(
            alphas[b, 0, :tgt_length, :length], expected_alphas, atol=1e-6, rtol=1e-6
        )


# --- properties -----------------------------------------------------------------------------


@pytest.mark.parametrize("overrides", VARIANTS)
def test_padding_changes_nothing_for_real_tokens(overrides):
    model = make_rnn(**overrides)
    src, tgt = tokens([7, 5]), tokens([6, 4], seed=1, bos=True)
    assert_padding_changes_nothing(model, src, tgt, PAD, tolerance=1e-6)
    # A sentence alone, unpadded, as in a batch with a longer one.
    alone = model(src[1:, :5], tgt[1:, :4])
    torch.testing.assert_close(alone[0], model(src, tgt)[1, :4], atol=1e-6, rtol=1e-6)


def test_attention_weights_sum_to_one_over_real_source_positions_and_are_zero_on_padding():
    model = make_rnn()
    src, tgt = tokens([7, 4]), tokens([5, 5], seed=1, bos=True)
    memory, encoder_weights = model.encode(src, need_weights=True)
    assert encoder_weights == []  # an RNN has no self-attention
    torch.testing.assert_close(memory, model.encode(src))
    logits, self_weights, src_weights = model.decode(
        tgt, memory, padding_mask(src, PAD), need_weights=True
    )
    torch.testing.assert_close(logits, model(src, tgt))
    assert self_weights == [] and len(src_weights) == 1
    (alpha,) = src_weights
    assert alpha.shape == (2, 1, 5, 7)  # (B, one "head", T, S)
    torch.testing.assert_close(alpha.sum(-1), torch.ones(2, 1, 5))
    assert (alpha[1, :, :, 4:] == 0).all() and (alpha[1, :, :, :4] > 0).all()


def test_indexed_positions_get_the_same_logits_as_the_full_output_layer():
    model = make_rnn()
    src, tgt = tokens([7, 5, 3]), tokens([6, 2, 4], seed=1, bos=True)
    index = (tgt.flatten() != PAD).nonzero().squeeze(1)
    selected = model(src, tgt, index)
    assert selected.shape == (12, VOCAB)
    torch.testing.assert_close(selected, model(src, tgt)[tgt != PAD], atol=1e-6, rtol=1e-6)


def test_the_decoder_is_causal():
    model = make_rnn()
    src, tgt = tokens([7, 5]), tokens([6, 6], seed=1, bos=True)
    changed = tgt.clone()
    changed[:, 4:] = tokens([2, 2], seed=2)
    before, after = model(src, tgt), model(src, changed)
    torch.testing.assert_close(after[:, :4], before[:, :4])
    assert not torch.allclose(after[:, 4:], before[:, 4:], atol=1e-3)


# --- incremental decoding and search --------------------------------------------------------


@pytest.mark.parametrize("overrides", VARIANTS)
def test_cached_decoding_equals_full_recompute(overrides):
    model = make_rnn(**overrides)
    src, tgt = tokens([7, 4, 6]), tokens([6, 4, 6], seed=1, bos=True)
    memory, src_mask = model.encode(src), padding_mask(src, PAD)
    full = model.decode(tgt, memory, src_mask)
    cache = model.new_cache()
    # A prefix of several tokens at once, then one token a step.
    chunks = [tgt[:, :3]] + [tgt[:, t : t + 1] for t in range(3, 6)]
    cached = torch.cat([model.decode(chunk, memory, src_mask, cache) for chunk in chunks], dim=1)
    assert cache["h"].shape == (3, model.config.num_layers, 24)
    torch.testing.assert_close(cached, full, atol=1e-5, rtol=1e-5)


def test_reorder_cache_follows_the_batch():
    model = make_rnn(cell="lstm")
    src, tgt = tokens([7, 4, 6]), tokens([5, 5, 5], seed=1, bos=True)
    memory, src_mask = model.encode(src), padding_mask(src, PAD)
    cache = model.new_cache()
    model.decode(tgt[:, :4], memory, src_mask, cache)
    order = torch.tensor([2, 0, 0])  # as beam search does: permute and duplicate
    cache = model.reorder_cache(cache, order, order)  # the rows read memory[order] from now on
    assert set(cache) == {"h", "c", "keys", "memory", "mask"}
    step = model.decode(tgt[order, 4:], memory[order], src_mask[order], cache)
    full = model(src[order], tgt[order])
    torch.testing.assert_close(step[:, 0], full[:, 4], atol=1e-5, rtol=1e-5)


def test_rows_sharing_a_sentences_memory_decode_as_with_its_copies():
    """Beam search's layout: beam k of sentence b is row b * G + k, reading memory row b."""
    model = make_rnn(cell="lstm")
    src, tgt = tokens([7, 4]), tokens([5, 3, 5, 4], seed=1, bos=True)  # 2 sentences x 2 rows
    memory, src_mask = model.encode(src), padding_mask(src, PAD)
    copies = torch.tensor([0, 0, 1, 1])
    full = model.decode(tgt, memory[copies], src_mask[copies])
    torch.testing.assert_close(model.decode(tgt, memory, src_mask), full, atol=1e-5, rtol=1e-5)
    cache = model.new_cache()
    model.decode(tgt[:, :3], memory, src_mask, cache)
    order, sources = torch.tensor([3, 2]), torch.tensor([1])  # sentence 0 leaves
    cache = model.reorder_cache(cache, order, sources)
    step = model.decode(tgt[order, 3:4], memory[sources], src_mask[sources], cache)
    torch.testing.assert_close(step[:, 0], full[order, 3], atol=1e-5, rtol=1e-5)


def test_reorder_within_one_source_keeps_its_keys():
    """Beam search's reorders while no sentence leaves: rows move among copies of one source."""
    model = make_rnn(cell="lstm")
    src, tgt = tokens([7, 4])[[0, 0, 1, 1]], tokens([5, 5, 5, 5], seed=1, bos=True)
    memory, src_mask = model.encode(src), padding_mask(src, PAD)
    cache = model.new_cache()
    model.decode(tgt[:, :4], memory, src_mask, cache)
    order = torch.tensor([1, 1, 3, 2])
    assert torch.equal(src[order], src)
    reordered = model.reorder_cache(cache, order)
    assert all(reordered[name] is cache[name] for name in ("keys", "memory", "mask"))  # kept
    step = model.decode(tgt[order, 4:], memory, src_mask, reordered)  # memory as it was
    full = model(src, tgt[order])
    torch.testing.assert_close(step[:, 0], full[:, 4], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("overrides", [{}, {"cell": "lstm", "num_layers": 2}])
def test_greedy_cached_equals_uncached_and_beam_size_one_is_greedy(overrides):
    model = make_rnn(**overrides)
    src = tokens([7, 3, 5, 6])
    unstopped = greedy_search(model, src, BOS, NEVER, max_len_b=4)
    for eos_id in (unstopped[0, 0].item(), unstopped[2, 2].item(), NEVER):
        greedy = greedy_search(model, src, BOS, eos_id, max_len_b=4)
        uncached = greedy_search(model, src, BOS, eos_id, max_len_b=4, use_cache=False)
        assert torch.equal(greedy, uncached)
        beams = beam_search(model, src, BOS, eos_id, beam_size=1, max_len_b=4)
        for row, (best,) in zip(greedy.tolist(), beams, strict=True):
            assert best.tokens == row[: len(best.tokens)], eos_id
            assert all(pad == PAD for pad in row[len(best.tokens) :])


def test_beam_search_cached_equals_uncached():
    model, src = make_rnn(), tokens([6, 2, 4])
    eos_id = greedy_search(model, src, BOS, NEVER, max_len_b=3)[1, 1].item()
    kwargs = dict(beam_size=3, n_best=3, max_len_b=3)
    cached = beam_search(model, src, BOS, eos_id, **kwargs)
    uncached = beam_search(model, src, BOS, eos_id, use_cache=False, **kwargs)
    for ours, theirs in zip(itertools.chain(*cached), itertools.chain(*uncached), strict=True):
        assert ours.tokens == theirs.tokens
        assert ours.score == pytest.approx(theirs.score, abs=1e-5)


# --- switches and construction --------------------------------------------------------------


@pytest.mark.parametrize("overrides", [*VARIANTS, {"tie_embeddings": "decoder"}])
def test_parameter_count_follows_the_equations(overrides):
    model = make_rnn(**overrides)
    assert count_parameters(model) == expected_parameters(model.config)


@pytest.mark.parametrize("tie", ["all", "decoder", "none"])
def test_tie_embeddings(tie):
    model = make_rnn(tie_embeddings=tie)
    assert (model.src_embed.weight is model.tgt_embed.weight) == (tie == "all")
    assert (model.tgt_embed.weight is model.generator.weight) == (tie != "none")
    assert model.generator.bias is None


def test_the_cell_switch_builds_lstms():
    model = make_rnn(cell="lstm")
    assert isinstance(model.encoder.forward_rnns[0], nn.LSTM)
    assert isinstance(model.cells[0], nn.LSTMCell)
    assert isinstance(make_rnn().cells[0], nn.GRUCell)


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"cell": "rnn"}, "model.cell='rnn' must be one of gru, lstm"),
        ({"tie_embeddings": "encoder"}, "model.tie_embeddings"),
        ({"num_layers": 0}, "model.num_layers=0 must be at least 1"),
    ],
)
def test_unknown_settings_are_rejected(bad, message):
    with pytest.raises(ValueError, match=message):
        make_rnn(**bad)


def test_config_rebuilds_the_model_and_names_its_family():
    model = make_rnn(cell="lstm", tie_embeddings="decoder")
    saved = json.loads(json.dumps(model.config.to_dict()))  # plain values only
    assert saved["family"] == "rnn_attention" and saved["attention_dim"] == 24
    assert model.config.d_model == 24  # the hidden size, for the learning-rate schedule
    clone = RNNAttention.from_config(RNNConfig.from_dict(saved)).eval()
    clone.load_state_dict(model.state_dict())
    src, tgt = tokens([7, 5]), tokens([6, 6], seed=1, bos=True)
    torch.testing.assert_close(clone(src, tgt), model(src, tgt))
    with pytest.raises(ValueError, match="settings of a transformer model"):
        RNNConfig.from_dict({**saved, "family": "transformer"})


def test_learns_the_toy_task():
    torch.manual_seed(0)
    model = RNNAttention(VOCAB_SIZE, PAD, embed_dim=32, hidden_size=64, dropout=0.0)
    losses = train_steps(model, toy_batch(), steps=60, lr=1e-2)
    # Targets are random number words: without reading the source no model gets below the
    # entropy of 20 words and EOS, ln 21 = 3.0 nats.
    assert losses[-1] < 1.0 < math.log(21) < losses[0]
