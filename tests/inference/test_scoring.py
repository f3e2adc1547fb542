"""Forced decoding scores what training's loss scores, and aligns a copy model on the diagonal."""

import random

import pytest
import torch
import torch.nn.functional as F

from transformer_nmt import Translator
from transformer_nmt.cli.score import main as score_main
from transformer_nmt.cli.translate import main as translate_main
from transformer_nmt.data.framing import decoder_input, decoder_target, pad_batch, source_ids
from transformer_nmt.data.tokenizer import EOS_ID, PAD_ID, BPETokenizer
from transformer_nmt.data.toy import ENGLISH
from transformer_nmt.decoding import length_penalty
from transformer_nmt.decoding.ensemble import Ensemble
from transformer_nmt.decoding.mbr import MBR
from transformer_nmt.decoding.sampling import Sampling
from transformer_nmt.inference.alignment import Alignment, pharaoh, word_indices
from transformer_nmt.inference.scoring import score_batch
from transformer_nmt.model import RNNAttention, Transformer
from transformer_nmt.training.step.loss import label_smoothed_nll

PAIRS = [
    ("one two three", "drei zwei eins"),
    ("", "null"),
    ("four five six seven eight", "acht"),
    ("nine", ""),
]


@pytest.fixture(scope="module")
def tokenizer() -> BPETokenizer:
    """Each toy word one token, first in a sentence or not: subword alignments are word ones."""
    rng = random.Random(0)
    sentences = [" ".join(rng.sample(ENGLISH, 8)) for _ in range(200)]
    tokenizer = BPETokenizer.train(sentences, vocab_size=400, min_frequency=1)
    assert len(tokenizer.encode_batch([" ".join(ENGLISH)])[0]) == len(ENGLISH)
    return tokenizer


def copy_batch(tokenizer: BPETokenizer, n: int, seed: int) -> tuple[list[str], dict]:
    """n sentences of 3 to 8 distinct toy words, framed to copy each to itself."""
    rng = random.Random(seed)
    sentences = [" ".join(rng.sample(ENGLISH, rng.randint(3, 8))) for _ in range(n)]
    ids = tokenizer.encode_batch(sentences)
    return sentences, {
        "src": pad_batch([source_ids(s) for s in ids]),
        "tgt_in": pad_batch([decoder_input(s) for s in ids]),
        "tgt_out": pad_batch([decoder_target(s) for s in ids]),
    }


@pytest.fixture(scope="module")
def copy_model(tokenizer) -> Transformer:
    """One layer, one head, trained on fresh copy batches until it copies unseen sentences."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: threads only add synchronisation
    torch.manual_seed(0)
    model = Transformer(tokenizer.vocab_size, PAD_ID, N=1, d_model=32, d_ff=64, h=1, dropout=0.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(200):
        batch = copy_batch(tokenizer, 64, seed=step)[1]
        real = batch["tgt_out"] != PAD_ID
        loss = F.cross_entropy(model(batch["src"], batch["tgt_in"])[real], batch["tgt_out"][real])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    torch.set_num_threads(threads)
    return model.eval()


def test_alignments_of_the_copy_task_are_the_diagonal(copy_model, tokenizer):
    sentences, _ = copy_batch(tokenizer, 32, seed=12345)  # none of them trained on
    translator = Translator(copy_model, tokenizer, device="cpu")
    scored = translator.score(sentences, sentences, batch_size=8, alignment=Alignment())
    diagonal = [" ".join(f"{i}-{i}" for i in range(len(s.split()))) for s in sentences]
    exact = sum(s.alignment == d for s, d in zip(scored, diagonal, strict=True))
    assert exact >= 30, [s.alignment for s in scored]
    mean = sum(s.mean for s in scored) / len(scored)
    assert mean > -0.3, [s.mean for s in scored]  # it copies: most of a token's mass is right


def test_forced_decoding_scores_are_the_training_losss_log_probabilities(tokenizer):
    torch.manual_seed(0)
    model = Transformer(tokenizer.vocab_size, PAD_ID, N=2, d_model=16, d_ff=32, h=2).eval()
    translator = Translator(model, tokenizer, device="cpu")
    sources, targets = zip(*PAIRS, strict=True)
    scored = translator.score(sources, targets, batch_size=2, per_token=True)
    src_ids, tgt_ids = tokenizer.encode_batch(list(sources)), tokenizer.encode_batch(list(targets))
    src = pad_batch([source_ids(s) for s in src_ids])
    tgt_in = pad_batch([decoder_input(t) for t in tgt_ids])
    tgt_out = pad_batch([decoder_target(t) for t in tgt_ids])
    real = tgt_out != PAD_ID
    logits = model(src, tgt_in)
    _, nll = label_smoothed_nll(logits[real], tgt_out[real], 0.0)
    assert sum(s.score for s in scored) == pytest.approx(-nll.item(), abs=1e-4)
    per_token = -F.cross_entropy(logits.transpose(1, 2), tgt_out, reduction="none")
    for b, s in enumerate(scored):
        length = len(tgt_ids[b]) + 1  # EOS last
        assert s.token_log_probs == pytest.approx(per_token[b, :length].tolist(), abs=1e-5)
        assert s.mean == pytest.approx(s.score / length)
        assert s.alignment is None
    alone = [translator.score([src_text], [tgt_text])[0] for src_text, tgt_text in PAIRS]
    assert [s.score for s in alone] == pytest.approx([s.score for s in scored], abs=1e-5)
    one = Translator(Ensemble([model]), tokenizer, device="cpu").score(sources, targets)
    assert [s.score for s in one] == [s.score for s in translator.score(sources, targets)]


def test_rnnsearch_aligns_through_its_one_attention(tokenizer):
    torch.manual_seed(0)
    model = RNNAttention(tokenizer.vocab_size, PAD_ID, embed_dim=16, hidden_size=16).eval()
    translator = Translator(model, tokenizer, device="cpu")
    (scored,) = translator.score(["one two three"], ["four five"], alignment=Alignment(layer=1))
    pairs = [tuple(map(int, pair.split("-"))) for pair in scored.alignment.split()]
    assert sorted(j for _, j in pairs) == [0, 1] and all(0 <= i < 3 for i, _ in pairs)


def test_pharaoh_pairs_words_by_the_mean_or_the_most_peaked_head(tokenizer):
    src, tgt = tokenizer.encode_batch(["one two", "three four"])
    vocab = tokenizer.tokens()
    assert word_indices(vocab, src) == [0, 1]
    # Two heads over 2 target rows (+ the EOS row) and 2 source columns (+ EOS).
    weights = torch.tensor(
        [
            [[0.4, 0.3, 0.3], [0.3, 0.4, 0.3], [0.0, 0.0, 1.0]],  # flat: diagonal
            [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]],  # peaked: crossed
        ]
    )
    assert pharaoh(weights[:1], src, tgt, vocab, "mean") == "0-0 1-1"
    assert pharaoh(weights, src, tgt, vocab, "best") == "0-1 1-0"
    assert pharaoh(weights, [], tgt, vocab, "mean") == ""


def test_scoring_refuses_what_it_cannot_do_naming_it(tokenizer):
    model = Transformer(tokenizer.vocab_size, PAD_ID, N=1, d_model=16, d_ff=32, h=2).eval()
    translator = Translator(model, tokenizer, device="cpu")
    with pytest.raises(ValueError, match="alignment layer must be >= 1"):
        Alignment(layer=0)
    with pytest.raises(ValueError, match="alignment heads must be one of"):
        Alignment(heads="max")
    with pytest.raises(ValueError, match="alignment layer 2: the decoder has 1 layers"):
        translator.score(["one"], ["two"], alignment=Alignment(layer=2))
    with pytest.raises(ValueError, match="line 2: a source without a target"):
        translator.score(["one", "two"], ["eins"])
    with pytest.raises(ValueError, match="more targets than the 1 sources"):
        translator.score(["one"], ["eins", "zwei"])
    with pytest.raises(ValueError, match="line 1: the target has 1100 tokens, more than"):
        translator.score(["one"], [" ".join(["one"] * 1100)])
    ensemble = Translator(Ensemble([model, model]), tokenizer, device="cpu")
    with pytest.raises(ValueError, match="alignments are one model's attention"):
        ensemble.score(["one"], ["two"], alignment=Alignment())


SEARCHES = {  # name: translate's options, each giving several hypotheses a sentence
    "beam, gnmt": dict(beam_size=4, n_best=4, alpha=0.6, penalty="gnmt"),
    "beam, fairseq": dict(beam_size=4, n_best=4, alpha=1.0, penalty="fairseq"),
    "sampling": dict(sampling=Sampling(n=4, temperature=1.0, seed=3), alpha=0.6),
    "mbr": dict(mbr=MBR(Sampling(n=4, temperature=1.0, seed=5), "both"), beam_size=3, n_best=3),
}


@pytest.mark.parametrize("search", SEARCHES)
def test_every_search_reports_the_score_forced_decoding_gives_the_same_pair(
    search, copy_model, tokenizer
):
    translator = Translator(copy_model, tokenizer, device="cpu")
    sources, _ = copy_batch(tokenizer, 6, seed=999)
    options = SEARCHES[search]
    found = translator.translate(sources, max_len_b=5, **options)
    pairs = [(s, text, score) for s, n in zip(sources, found, strict=True) for text, score in n]
    assert len({text for _, text, _ in pairs}) > len(sources)  # not only the copies
    sources_, texts, reported = zip(*pairs, strict=True)
    forced = translator.score(sources_, texts)
    # Equal up to float32 sums: search adds a step's log-probability at a time, on the device.
    assert list(reported) == pytest.approx([s.score for s in forced], rel=1e-5, abs=1e-5)


@pytest.mark.parametrize("search", ["beam, gnmt", "beam, fairseq", "sampling"])
def test_a_hypothesis_score_is_its_log_probability_and_normalized_divides_it(
    search, copy_model, tokenizer
):
    """The search engine's own hypotheses: ids forced-decoded as ids, no tokenizer between."""
    translator = Translator(copy_model, tokenizer, device="cpu")
    sources, _ = copy_batch(tokenizer, 6, seed=998)
    options = dict(max_len_b=3, beam_size=4, n_best=4, alpha=0.6, penalty="gnmt")
    options |= {k: v for k, v in SEARCHES[search].items() if k != "sampling"}
    extra = {}
    if search == "sampling":
        extra = dict(sampling=SEARCHES[search]["sampling"], indices=[list(range(6))])
    ids = tokenizer.encode_batch(sources)
    (found,) = translator.search([ids], **options, **extra)
    hypotheses = [(i, h) for i, n in enumerate(found) for h in n if h.tokens[-1] == EOS_ID]
    assert len(hypotheses) >= 12
    forced = score_batch(copy_model, torch.device("cpu"), [ids[i] for i, _ in hypotheses],
                         [h.tokens[:-1] for _, h in hypotheses])  # fmt: skip
    expected = [s.score for s in forced]
    assert [h.score for _, h in hypotheses] == pytest.approx(expected, rel=1e-5, abs=1e-5)
    for _, h in hypotheses:
        penalty = length_penalty(len(h.tokens), options["alpha"], options["penalty"])
        assert h.normalized == pytest.approx(h.score / penalty, rel=1e-6)


def test_nmt_translate_prints_for_a_hypothesis_the_score_nmt_score_prints(
    copy_model, tokenizer, tmp_path, capsys
):
    checkpoint = tmp_path / "copy.ckpt"
    torch.save(
        {
            "state_dict": {f"model.{k}": v for k, v in copy_model.state_dict().items()},
            "model_config": copy_model.config.to_dict(),
            "tokenizer": tokenizer.to_str(),
        },
        checkpoint,
    )
    sources, _ = copy_batch(tokenizer, 4, seed=997)
    (tmp_path / "src.txt").write_text("\n".join(sources) + "\n")
    common = [str(checkpoint), str(tmp_path / "src.txt"), "--max-len-b", "5"]
    for options in (["--n-best", "3", "--beam-size", "3"], ["--sample", "3", "--seed", "2"]):
        translate_main([*common, *options])
        (tmp_path / "n_best.txt").write_text(capsys.readouterr().out)
        files = ["--src", str(tmp_path / "src.txt"), "--n-best", str(tmp_path / "n_best.txt")]
        score_main([str(checkpoint), *files])
        rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
        assert len(rows) == 12
        # line, score, text, then nmt-score's score and mean: both printed to 4 decimals.
        assert [float(r[1]) for r in rows] == pytest.approx([float(r[3]) for r in rows], abs=2e-4)
