import json
import warnings

import pytest
import torch
from padding_property import assert_padding_changes_nothing
from torch import nn

from helpers.toy_training import VOCAB_SIZE, toy_batch, train_steps
from transformer_nmt.model import Transformer, TransformerConfig, reorder_cache
from transformer_nmt.model.masks import causal_mask, padding_mask
from transformer_nmt.model.transformer.attention import MultiHeadAttention

PAD = 0  # as in conftest's tiny models


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())  # shared (tied) tensors count once


def linear(n_in: int, n_out: int) -> int:
    return n_in * n_out + n_out  # weights and biases


def expected_parameters(config: TransformerConfig) -> int:
    """The parameter count from the paper's layer definitions, independently of the code."""
    V, d_model, h = config.vocab_size, config.d_model, config.h
    d_k, d_v = config.d_k, config.d_v
    attention = 2 * linear(d_model, h * d_k) + linear(d_model, h * d_v) + linear(h * d_v, d_model)

    def ffn(d_ff: int) -> int:
        return linear(d_model, d_ff) + linear(d_ff, d_model)

    # Each sublayer's residual connection: a LayerNorm, or ReZero's one scalar alpha.
    residual = 1 if config.rezero else 2 * d_model
    encoder = config.N_enc * (attention + ffn(config.d_ff) + 2 * residual)
    decoder = config.N_dec * (2 * attention + ffn(config.d_ff_dec) + 3 * residual)
    final_norms = 2 * 2 * d_model if config.norm_first else 0
    embeddings = {"all": 1, "decoder": 2, "none": 3}[config.tie_embeddings] * V * d_model
    learned = config.positions == "learned"
    positions = 2 * config.max_positions * d_model if learned else 0
    return encoder + decoder + final_norms + embeddings + positions


# --- parity with torch.nn.Transformer -------------------------------------------------------


def copy_attention(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    # Both stack [W^Q; W^K; W^V] row-wise.
    if ours.self_attention:
        theirs.in_proj_weight.copy_(ours.w_qkv.weight)
        theirs.in_proj_bias.copy_(ours.w_qkv.bias)
    else:
        theirs.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_kv.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_kv.bias]))
    theirs.out_proj.load_state_dict(ours.w_o.state_dict())


@torch.no_grad()
def reference_transformer(model: Transformer) -> nn.Transformer:
    """torch.nn.Transformer holding a copy of the model's encoder and decoder weights."""
    c = model.config
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nested tensors are unavailable with norm_first
        ref = nn.Transformer(
            c.d_model, c.h, c.N_enc, c.N_dec, c.d_ff, dropout=0.0,
            batch_first=True, norm_first=c.norm_first,
        )  # fmt: skip
    # nn.Transformer always ends each stack with a LayerNorm. A post-norm layer already ends with
    # one and the paper adds no other, so for post-norm the reference's are replaced by identities;
    # for pre-norm they are the stacks' final norms, copied like the rest.
    if c.norm_first:
        ref.encoder.norm.load_state_dict(model.encoder.norm.state_dict())
        ref.decoder.norm.load_state_dict(model.decoder.norm.state_dict())
    else:
        ref.encoder.norm = ref.decoder.norm = nn.Identity()
    for ours, theirs in zip(model.encoder.layers, ref.encoder.layers, strict=True):
        copy_attention(ours.self_attn, theirs.self_attn)
        theirs.linear1.load_state_dict(ours.feed_forward.w_1.state_dict())
        theirs.linear2.load_state_dict(ours.feed_forward.w_2.state_dict())
        theirs.norm1.load_state_dict(ours.sublayer[0].norm.state_dict())
        theirs.norm2.load_state_dict(ours.sublayer[1].norm.state_dict())
    for ours, theirs in zip(model.decoder.layers, ref.decoder.layers, strict=True):
        copy_attention(ours.self_attn, theirs.self_attn)
        copy_attention(ours.src_attn, theirs.multihead_attn)
        theirs.linear1.load_state_dict(ours.feed_forward.w_1.state_dict())
        theirs.linear2.load_state_dict(ours.feed_forward.w_2.state_dict())
        theirs.norm1.load_state_dict(ours.sublayer[0].norm.state_dict())
        theirs.norm2.load_state_dict(ours.sublayer[1].norm.state_dict())
        theirs.norm3.load_state_dict(ours.sublayer[2].norm.state_dict())
    return ref.eval()


@pytest.mark.parametrize(
    "settings",
    [{}, {"norm_first": True}, {"N_enc": 3, "N_dec": 1}],
    ids=["post-norm", "pre-norm", "3-1"],
)
def test_parity_with_torch_nn_transformer(make_model, make_tokens, settings):
    model = make_model(**settings)
    with torch.no_grad():  # move LayerNorms off their identity init so a mix-up would show
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    ref = reference_transformer(model)
    src, tgt = make_tokens([7, 4, 6]), make_tokens([5, 6, 3], seed=1, bos=True)
    T = tgt.size(1)

    # The reference sees our embeddings and positions and goes through our output projection.
    # Its boolean masks mean the opposite of ours: True = may not attend.
    out = ref(
        model.src_positions(model.src_embed(src)),
        model.tgt_positions(model.tgt_embed(tgt)),
        tgt_mask=~causal_mask(T)[0, 0],
        src_key_padding_mask=src == PAD,
        tgt_key_padding_mask=tgt == PAD,
        memory_key_padding_mask=src == PAD,
    )
    # Real target positions only: our decoder does not mask target padding for padding's own
    # queries (causal attention keeps real positions off it), so only those rows may differ.
    real = tgt != PAD
    torch.testing.assert_close(
        model(src, tgt)[real], model.generator(out)[real], atol=1e-5, rtol=1e-5
    )


# --- properties -----------------------------------------------------------------------------


def test_decoder_is_causal(make_model, make_tokens):
    model = make_model()
    src, tgt = make_tokens([7, 5]), make_tokens([6, 6], seed=1, bos=True)
    changed = tgt.clone()
    changed[:, 4:] = make_tokens([2, 2], seed=2)
    before, after = model(src, tgt), model(src, changed)
    torch.testing.assert_close(after[:, :4], before[:, :4], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(after[:, 4:], before[:, 4:], atol=1e-3)


def test_padding_changes_nothing_for_real_tokens(make_model, make_tokens, device):
    model = make_model().to(device)
    src = make_tokens([7, 5], device=device)
    tgt = make_tokens([6, 4], seed=1, bos=True, device=device)
    assert_padding_changes_nothing(model, src, tgt, PAD, tolerance=1e-5)


def test_indexed_positions_get_the_same_logits_as_the_full_projection(make_model, make_tokens):
    model = make_model()
    src, tgt = make_tokens([7, 5, 3]), make_tokens([6, 2, 4], seed=1, bos=True)
    index = (tgt.flatten() != PAD).nonzero().squeeze(1)
    selected = model(src, tgt, index)
    assert selected.shape == (12, 50)
    torch.testing.assert_close(selected, model(src, tgt)[tgt != PAD], atol=1e-5, rtol=1e-5)


def test_attention_weights_of_every_layer(make_model, make_tokens):
    model = make_model()
    src, tgt = make_tokens([7, 4]), make_tokens([5, 5], seed=1, bos=True)
    memory, encoder_weights = model.encode(src, need_weights=True)
    src_mask = padding_mask(src, PAD)
    logits, self_weights, src_weights = model.decode(tgt, memory, src_mask, need_weights=True)
    # The explicit path returning weights computes the same as the fused path.
    torch.testing.assert_close(logits, model(src, tgt), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(memory, model.encode(src), atol=1e-5, rtol=1e-5)

    assert len(encoder_weights) == len(self_weights) == len(src_weights) == 2
    for w in encoder_weights + self_weights + src_weights:
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]))
    is_pad = (src == PAD)[:, None, None, :]  # (B, 1, 1, S)
    future = ~causal_mask(5)
    for enc, dec_self, dec_src in zip(encoder_weights, self_weights, src_weights, strict=True):
        assert enc.shape == (2, 4, 7, 7) and dec_self.shape == (2, 4, 5, 5)
        assert dec_src.shape == (2, 4, 5, 7)
        assert (enc.masked_select(is_pad) == 0).all()
        assert (dec_src.masked_select(is_pad) == 0).all()
        assert (dec_self.masked_select(future) == 0).all()


def test_a_decoder_start_is_read_before_the_targets(make_model, make_tokens):
    started, plain = make_model(decoder_start=2), make_model()
    plain.load_state_dict(started.state_dict())
    src, tgt = make_tokens([7, 4]), make_tokens([5, 5], seed=1, bos=True)
    memory, src_mask = started.encode(src), padding_mask(src, PAD)
    # The same network reading one more target token in front, whose prediction is dropped.
    two = torch.cat([torch.full_like(tgt[:, :1], 2), tgt], dim=1)
    torch.testing.assert_close(started(src, tgt), plain(src, two)[:, 1:], atol=1e-5, rtol=1e-5)
    logits, self_weights, src_weights = started.decode(tgt, memory, src_mask, need_weights=True)
    assert logits.shape == (2, 5, 50)
    assert self_weights[0].shape == (2, 4, 5, 6)  # each target position sees the start too
    assert src_weights[0].shape == (2, 4, 5, 7)
    assert not torch.allclose(logits, plain.decode(tgt, memory, src_mask), atol=1e-3)


# --- incremental decoding -------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"norm_first": True},
        {"positions": "learned"},
        {"d_k": 6, "d_v": 10},
        {"N_enc": 3, "N_dec": 1, "d_ff_dec": 16},
        {"norm_first": True, "positions": "fairseq", "decoder_start": 2},
    ],
)
def test_cached_decoding_equals_full_recompute(make_model, make_tokens, overrides, device):
    model = make_model(**overrides).to(device)
    src = make_tokens([7, 4, 6], device=device)
    tgt = make_tokens([6, 4, 6], seed=1, bos=True, device=device)
    memory, src_mask = model.encode(src), padding_mask(src, PAD)
    full = model.decode(tgt, memory, src_mask)
    cache = model.new_cache()
    # A prefix of several tokens at once, then one token a step.
    chunks = [tgt[:, :3]] + [tgt[:, t : t + 1] for t in range(3, 6)]
    cached = torch.cat([model.decode(chunk, memory, src_mask, cache) for chunk in chunks], dim=1)
    started = model.config.decoder_start is not None  # the cache holds the start token too
    assert cache[0]["self_attn"].length == 6 + started
    real = tgt != PAD  # the cache does not mask target padding; search never reads past EOS
    torch.testing.assert_close(cached[real], full[real], atol=1e-5, rtol=1e-5)


def test_reorder_cache_follows_the_batch(make_model, make_tokens, device):
    model = make_model().to(device)
    src = make_tokens([7, 4, 6], device=device)
    tgt = make_tokens([5, 5, 5], seed=1, bos=True, device=device)
    memory, src_mask = model.encode(src), padding_mask(src, PAD)
    cache = model.new_cache()
    model.decode(tgt[:, :4], memory, src_mask, cache)
    order = torch.tensor([2, 0, 0], device=device)  # as beam search does: permute and duplicate
    cache = reorder_cache(cache, order, order)  # the rows read memory[order] from now on
    step = model.decode(tgt[order, 4:], memory[order], src_mask[order], cache)
    full = model(src[order], tgt[order])
    torch.testing.assert_close(step[:, 0], full[:, 4], atol=1e-5, rtol=1e-5)


def test_reorder_within_one_source_keeps_its_keys_and_values(make_model, make_tokens, device):
    """Beam search's reorders while no sentence leaves: rows move among copies of one source."""
    model = make_model().to(device)
    src = make_tokens([7, 4], device=device)[[0, 0, 1, 1]]  # two sentences, two beams each
    tgt = make_tokens([5, 5, 5, 5], seed=1, bos=True, device=device)
    memory, src_mask = model.encode(src), padding_mask(src, PAD)
    cache = model.new_cache()
    model.decode(tgt[:, :4], memory, src_mask, cache)
    order = torch.tensor([1, 1, 3, 2], device=device)
    assert torch.equal(src[order], src)
    reordered = model.reorder_cache(cache, order)
    for layer, new_layer in zip(cache, reordered, strict=True):
        assert new_layer["src_attn"]["k"] is layer["src_attn"]["k"]  # kept, not copied
        assert new_layer["src_attn"]["v"] is layer["src_attn"]["v"]
    step = model.decode(tgt[order, 4:], memory, src_mask, reordered)  # memory as it was
    full = model(src, tgt[order])
    torch.testing.assert_close(step[:, 0], full[:, 4], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("overrides", [{}, {"norm_first": True, "decoder_start": 3}])
def test_rows_sharing_a_sentences_memory_decode_as_with_its_copies(
    make_model, make_tokens, overrides
):
    """Beam search's layout: beam k of sentence b is row b * G + k, reading memory row b."""
    model, G = make_model(**overrides), 3
    src = make_tokens([7, 4])
    tgt = make_tokens([5, 3, 5, 4, 5, 2], seed=1, bos=True)  # 2 sentences x 3 rows
    memory, src_mask = model.encode(src), padding_mask(src, PAD)
    copies = torch.arange(2).repeat_interleave(G)
    full, *weights = model.decode(tgt, memory[copies], src_mask[copies], need_weights=True)
    shared, *shared_weights = model.decode(tgt, memory, src_mask, need_weights=True)
    torch.testing.assert_close(shared, full, atol=1e-5, rtol=1e-5)
    for ours, theirs in zip(shared_weights[1], weights[1], strict=True):  # encoder-decoder
        torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=1e-5)
    cache = model.new_cache()
    model.decode(tgt[:, :3], memory, src_mask, cache)
    assert cache[0]["src_attn"]["k"].size(0) == 2  # projected once a sentence
    # Sentence 0 leaves; sentence 1's rows are reordered and read its memory row alone.
    order, sources = torch.tensor([5, 3, 3]), torch.tensor([1])
    cache = model.reorder_cache(cache, order, sources)
    step = model.decode(tgt[order, 3:4], memory[sources], src_mask[sources], cache)
    expected = model(src[copies][order], tgt[order, :4])[:, 3]
    torch.testing.assert_close(step[:, 0], expected, atol=1e-5, rtol=1e-5)


# --- switches -------------------------------------------------------------------------------


@pytest.mark.parametrize("tie", ["all", "decoder", "none"])
def test_tie_embeddings(make_model, tie):
    model = make_model(tie_embeddings=tie)
    assert (model.src_embed.weight is model.tgt_embed.weight) == (tie == "all")
    assert (model.tgt_embed.weight is model.generator.weight) == (tie != "none")
    assert model.generator.bias is None
    assert count_parameters(model) == expected_parameters(model.config)


def test_base_model_has_about_65M_parameters():
    with torch.device("meta"):  # sizes only: no memory, no init time
        model = Transformer(vocab_size=37000, pad_id=0)
    n = count_parameters(model)
    assert n == expected_parameters(model.config)
    assert 60e6 < n < 66e6  # the paper: 65M


def test_norm_first_adds_final_norms(make_model):
    assert isinstance(make_model().encoder.norm, nn.Identity)
    model = make_model(norm_first=True)
    assert isinstance(model.encoder.norm, nn.LayerNorm)
    assert isinstance(model.decoder.norm, nn.LayerNorm)
    assert count_parameters(model) == expected_parameters(model.config)


def test_rezero_layers_start_as_the_identity_and_have_no_layer_norm(make_model, make_tokens):
    model = make_model(rezero=True)
    assert count_parameters(model) == expected_parameters(model.config)
    assert not any(isinstance(m, nn.LayerNorm) for m in model.modules())
    src, tgt = make_tokens([7, 4]), make_tokens([5, 5], seed=1, bos=True)
    src_mask = padding_mask(src, PAD)
    x = torch.randn(2, 7, 32)
    for layer in model.encoder.layers:
        out, _ = layer(x, src_mask)
        assert torch.equal(out, x)
    y, memory = torch.randn(2, 5, 32), torch.randn(2, 7, 32)
    for layer in model.decoder.layers:
        out, _, _ = layer(y, memory, src_mask, None)
        assert torch.equal(out, y)
    # So the whole model starts as embeddings straight into the (tied) output projection.
    logits = model(src, tgt)
    torch.testing.assert_close(logits, model.generator(model.tgt_positions(model.tgt_embed(tgt))))


def test_rezero_alphas_move_the_output(make_model, make_tokens):
    model = make_model(rezero=True)
    src, tgt = make_tokens([7, 4]), make_tokens([5, 5], seed=1, bos=True)
    before = model(src, tgt)
    with torch.no_grad():
        model.decoder.layers[1].sublayer[2].alpha.fill_(0.5)
    assert not torch.allclose(model(src, tgt), before, atol=1e-3)


def test_a_rezero_model_learns_the_toy_task():
    torch.manual_seed(0)
    model = Transformer(VOCAB_SIZE, PAD, N=2, d_model=32, d_ff=64, h=4, dropout=0.0, rezero=True)
    losses = train_steps(model, toy_batch(), steps=60, lr=1e-2)
    # Targets are random number words: without reading the source no model gets below the
    # entropy of 20 words and EOS, ln 21 = 3.0 nats.
    assert losses[-1] < 1.0 < 3.0 < losses[0]
    alphas = [block.alpha for layer in model.decoder.layers for block in layer.sublayer]
    assert all(alpha.item() != 0 for alpha in alphas)


def test_rezero_excludes_norm_first(make_model):
    with pytest.raises(ValueError, match="model.rezero=true and model.norm_first=true"):
        make_model(rezero=True, norm_first=True)


def test_learned_positions(make_model, make_tokens):
    model = make_model(positions="learned")
    assert count_parameters(model) == expected_parameters(model.config)
    src, tgt = make_tokens([7, 5]), make_tokens([6, 6], seed=1, bos=True)
    before = model(src, tgt)
    with torch.no_grad():
        model.tgt_positions.embedding.weight.add_(1.0)
    assert not torch.allclose(model(src, tgt), before, atol=1e-3)


def test_gelu_activation(make_model, make_tokens):
    relu, gelu = make_model(), make_model(activation="gelu")
    gelu.load_state_dict(relu.state_dict())
    assert isinstance(gelu.decoder.layers[0].feed_forward.activation, nn.GELU)
    src, tgt = make_tokens([7, 5]), make_tokens([6, 6], seed=1, bos=True)
    assert not torch.allclose(gelu(src, tgt), relu(src, tgt), atol=1e-3)


def test_d_k_and_d_v_set_apart_from_d_model_and_h(make_model, make_tokens):
    model = make_model(d_k=6, d_v=10)
    attn = model.decoder.layers[0].src_attn
    assert attn.w_kv.weight.shape == (4 * 16, 32) and attn.w_o.weight.shape == (32, 4 * 10)
    assert count_parameters(model) == expected_parameters(model.config)
    src, tgt = make_tokens([7, 5]), make_tokens([6, 6], seed=1, bos=True)
    assert model(src, tgt).shape == (2, 6, 50)


def test_each_stack_takes_its_own_depth_and_the_decoder_its_own_width(make_model):
    model = make_model(N=4, N_dec=1, d_ff_dec=16)
    assert (len(model.encoder.layers), len(model.decoder.layers)) == (4, 1)
    assert (model.config.N_enc, model.config.N_dec) == (4, 1)  # None resolved: N
    assert model.encoder.layers[0].feed_forward.w_1.out_features == 64  # d_ff
    assert model.decoder.layers[0].feed_forward.w_1.out_features == 16
    assert len(model.new_cache()) == 1  # one entry per decoder layer
    assert count_parameters(model) == expected_parameters(model.config)
    symmetric = make_model(N=3).config
    assert (symmetric.N_enc, symmetric.N_dec, symmetric.d_ff_dec) == (3, 3, 64)


def test_sizes_name_each_stacks_own_only_where_they_differ(make_model):
    assert make_model().config.sizes() == "N=2, d_model=32, d_ff=64, h=4"
    student = make_model(N_enc=3, N_dec=1, d_ff_dec=16).config
    assert student.sizes() == "N_enc=3, N_dec=1, d_model=32, d_ff=64, d_ff_dec=16, h=4"


def test_a_checkpoint_holding_N_alone_loads_as_both_stacks(make_model):
    saved = make_model(N=3).config.to_dict()
    for key in ("N_enc", "N_dec", "d_ff_dec"):
        del saved[key]  # as checkpoints from before each stack had its own
    config = TransformerConfig.from_dict(saved)
    assert (config.N_enc, config.N_dec, config.d_ff_dec) == (3, 3, 64)


@pytest.mark.parametrize(
    ("key", "value"), [("N", 0), ("N_enc", 0), ("N_dec", -1), ("d_ff_dec", 0), ("N_dec", 1.5)]
)
def test_depths_and_widths_below_one_are_refused_by_name(make_model, key, value):
    with pytest.raises(
        ValueError, match=rf"model.{key}={value} must be a whole number of at least 1"
    ):
        make_model(**{key: value})


def test_d_model_not_divisible_by_h_needs_explicit_d_k_and_d_v(make_model):
    with pytest.raises(ValueError, match=r"d_model=30 is not divisible by model.h=4"):
        make_model(d_model=30)
    assert make_model(d_model=30, d_k=8, d_v=8).config.d_k == 8


@pytest.mark.parametrize("bad", [{"positions": "rotary"}, {"tie_embeddings": "encoder"}])
def test_unknown_switch_values_are_rejected(make_model, bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        make_model(**bad)


@pytest.mark.parametrize("key", ["dropout", "attention_dropout", "activation_dropout"])
@pytest.mark.parametrize("rate", [-0.1, 1.0])
def test_dropout_rates_outside_0_to_1_are_rejected(make_model, key, rate):
    with pytest.raises(ValueError, match=rf"model.{key}={rate} must lie in \[0, 1\)"):
        make_model(**{key: rate})


# --- construction ---------------------------------------------------------------------------


def test_config_rebuilds_the_model(make_model, make_tokens):
    model = make_model(positions="learned", tie_embeddings="decoder", N_enc=3, N_dec=1)
    saved = json.loads(json.dumps(model.config.to_dict()))  # plain values only
    assert saved["family"] == "transformer"
    clone = Transformer.from_config(TransformerConfig.from_dict(saved)).eval()
    clone.load_state_dict(model.state_dict())
    src, tgt = make_tokens([7, 5]), make_tokens([6, 6], seed=1, bos=True)
    torch.testing.assert_close(clone(src, tgt), model(src, tgt))


def test_a_config_without_family_is_a_transformers_and_another_familys_is_refused(make_model):
    saved = make_model().config.to_dict()
    del saved["family"]  # as checkpoints from before there were families
    assert TransformerConfig.from_dict(saved) == make_model().config
    with pytest.raises(ValueError, match="settings of a rnn_attention model"):
        TransformerConfig.from_dict({**saved, "family": "rnn_attention"})
    with pytest.raises(ValueError, match=r"unknown transformer settings \['width'\]"):
        TransformerConfig.from_dict({**saved, "width": 3})


def test_embedding_init(make_model):
    model = make_model(vocab_size=2000, d_model=64, tie_embeddings="none")
    for weight in (model.src_embed.weight, model.tgt_embed.weight):
        assert (weight[PAD] == 0).all()
        assert abs(weight[PAD + 1 :].std().item() - 64**-0.5) < 0.01
