"""The explorer page's data: the weights' coding, an older page's re-coded, the run page bounded."""

import base64
import json

import numpy as np
import pytest

from transformer_nmt.explorer import explorer_html, run_validations
from transformer_nmt.explorer.page import RUN_SENTENCES, RUN_VALIDATIONS
from transformer_nmt.explorer.sentence import CODING, LEVELS, decode_weights, encode_weights


def test_the_coding_keeps_every_weight_within_a_step_and_small_ones_apart():
    w = np.random.default_rng(0).random((2, 3, 7, 5)).astype(np.float32)
    w[0, 0, 0, :3] = [0.004, 0.006, 0.0]
    back = decode_weights(encode_weights(w))
    assert back.shape == w.shape
    assert np.abs(back - w).max() <= 1 / LEVELS
    assert len(set(back[0, 0, 0, :3].tolist())) == 3  # a linear byte would round 0.004 = 0.006


def page_data(html: str) -> dict:
    start = html.index('id="data">') + len('id="data">')
    return json.loads(html[start : html.index("</script>", start)].replace("<\\/", "</"))


def test_an_older_pages_weights_are_recoded():
    w = np.random.default_rng(1).random((1, 2, 3, 4)).astype(np.float32)
    old = {  # little-endian uint16 steps of 1/65535, before the coding was named
        "shape": list(w.shape),
        "data": base64.b64encode(np.rint(w * 65535).astype("<u2").tobytes()).decode(),
    }
    empty = {"shape": [0, 0, 0, 0], "data": ""}
    reading = {
        "name": "translation",
        "tgt": [],
        "text": "",
        "decoder_self": old,
        "decoder_src": old,
    }
    sentence = {"src": [], "source": "", "encoder_self": empty, "readings": [reading]}
    ((shown,),) = [
        v["sentences"]
        for v in page_data(explorer_html([{"step": 1, "sentences": [sentence]}], "t"))[
            "validations"
        ]
    ]
    recoded = shown["readings"][0]["decoder_src"]
    assert recoded["coding"] == CODING  # the one the page's script reads
    assert np.abs(decode_weights(recoded) - w).max() <= 1 / LEVELS
    assert decode_weights(shown["encoder_self"]).shape == (0, 0, 0, 0)


@pytest.mark.parametrize("count", [1, RUN_VALIDATIONS, RUN_VALIDATIONS + 1, 100])
def test_the_run_page_keeps_the_first_and_last_validations_and_a_bounded_number(count):
    validations = [{"step": s, "sentences": list(range(RUN_SENTENCES + 2))} for s in range(count)]
    kept = run_validations(validations)
    steps = [v["step"] for v in kept]
    assert len(kept) == min(count, RUN_VALIDATIONS)
    assert steps[0] == 0 and steps[-1] == count - 1 and steps == sorted(set(steps))
    gaps = np.diff(steps)
    assert len(kept) < 3 or gaps.max() - gaps.min() <= 1  # evenly spaced
    assert all(v["sentences"] == list(range(RUN_SENTENCES)) for v in kept)
