"""BLEU-tok, the paper-comparable tokenized BLEU of `nmt-evaluate`, against hand-counted n-grams."""

import pytest
from sacrebleu.metrics import BLEU

from transformer_nmt.evaluation.corpus_scores import paper_tokenize, score


def test_tokenized_bleu_equals_hand_counted_ngrams():
    hypothesis = "Die Ost-West-Verbindung war gut."
    reference = "Die Ost-West-Verbindung ist gut."
    # Both become 9 tokens: Die Ost ##AT##-##AT## West ##AT##-##AT## Verbindung war|ist gut .
    # Only the 7th token differs, so matches are 8/9 unigrams, 6/8 bigrams (the two with
    # "war" miss), 4/7 trigrams (three miss) and 3/6 4-grams (three miss).
    expected = BLEU.compute_bleu(
        correct=[8, 6, 4, 3], total=[9, 8, 7, 6], sys_len=9, ref_len=9
    ).score
    report = score([hypothesis], [reference], "de")
    assert report["BLEU-tok"]["score"] == pytest.approx(expected)  # 66.06
    # sacreBLEU's 13a keeps the compound whole: 7 tokens, another score.
    assert report["BLEU"]["score"] != pytest.approx(expected)
    assert "tok:none" in report["BLEU-tok"]["signature"]
    assert report["BLEU-tok"]["signature"].endswith("|pretok:moses-de+compound-split")


def test_compound_splitting_is_the_scripts_single_perl_pass():
    # perl's s{(\S)-(\S)}{...}g resumes after "2", so "2-3" stays whole; markers stay intact.
    # The expected line is what `perl -ple` printed for the same tokenized input.
    assert paper_tokenize(['1-2-3 "x" & Mutter-Kind.'], "de") == [
        '1 ##AT##-##AT## 2-3 " x " & Mutter ##AT##-##AT## Kind .'
    ]


def test_detokenized_outputs_draw_no_warning_from_the_tokenized_score(caplog):
    lines = ["A man runs."] * 120  # sacreBLEU warns past 100 lines ending in " ."
    score(lines, lines, "en")
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
