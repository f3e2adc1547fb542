"""The explorer's picture, read from pixels and geometry in a real headless Chromium.

The page is built from data whose picture is known (a diagonal, a permutation, one hot cell, a
fixed beam); each check sets the controls as a person would, then reads what is drawn. The
mutation check breaks the page in many ways and asserts that a picture check catches each.
"""

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from helpers.browser import chromium, load
from helpers.picture import (
    BACKGROUND,
    Box,
    boxes,
    ink_box,
    ink_runs,
    large_cells,
    legend,
    legend_band,
    near,
    pixel,
    shot,
)
from transformer_nmt.explorer import explorer_html
from transformer_nmt.explorer.sentence import encode_weights

SRC = ["ein", "Hund", "rennt", "schnell", "</s>"]
TGT = ["<s>", "a", "dog", "runs", "fast"]  # what the decoder reads
OUT = ["a", "dog", "runs", "fast", "</s>"]  # what each position predicts: the rows' labels
N = len(SRC)
PERMUTATION = [2, 0, 4, 1, 3]  # target row i attends to source p[i]; i + p[i] all differ
HOT = (1, 3)  # the one hot cell of layer 1, head 2
VIRIDIS_0, VIRIDIS_1 = np.array([68, 1, 84]), np.array([253, 231, 37])
HIGHLIGHT = np.array([228, 87, 46])  # #e4572e

EYE = np.eye(N)
ANTI = np.fliplr(EYE)
PERM = EYE[PERMUTATION]  # row i: one at column p[i]
ONE_HOT = np.zeros((N, N))
ONE_HOT[HOT] = 1.0
FAINT = np.full((N, N), 0.02)  # no weight reaches 0.1: each row's largest, 0.08, at p[i]
FAINT[np.arange(N), PERMUTATION] = 0.08


def encoded(*layers: list[np.ndarray]) -> dict:
    """Layers of heads of (T_q, T_k) maps, in the page's coding."""
    return encode_weights(np.array([np.stack(heads) for heads in layers]))


# A fixed beam of 2: per step [parent beam, token id, score (log-probability), status, normalized].
VOCAB = {"2": "</s>", "10": "a", "11": "the", "12": "dog", "13": "cat", "14": "runs"}
STEPS = [
    [[0, 10, -0.1, "k", None], [0, 11, -0.7, "k", None], [0, 2, -3.0, "p", None],
     [0, 13, -3.5, "p", None]],
    [[0, 12, -0.3, "k", None], [1, 12, -1.0, "k", None], [0, 13, -2.0, "p", None],
     [1, 2, -2.2, "f", -1.9]],
    [[0, 2, -0.5, "f", -0.4], [1, 2, -1.4, "f", -1.2], [0, 14, -2.5, "p", None],
     [1, 14, -2.9, "p", None]],
]  # fmt: skip
CHOSEN = [10, 12, 2]


def sentence(source: str, encoder_first: np.ndarray) -> dict:
    """Two layers of two heads; layer 1 head 1 of the encoder is `encoder_first`."""
    tril = np.tril(np.ones((N, N))) / np.arange(1, N + 1)[:, None]
    reading = {
        "tgt": TGT,
        "out": OUT,
        "decoder_self": encoded([EYE, tril], [tril, tril]),
        "decoder_src": encoded([PERM, ONE_HOT], [EYE, FAINT]),
    }
    return {
        "src": SRC,
        "source": source,
        "layers": [1, 2],
        "encoder_self": encoded([encoder_first, ANTI], [EYE[[1] * N], np.full((N, N), 0.2)]),
        "readings": [
            {"name": "translation", "text": "a dog runs fast", **reading},
            {"name": "reference", "text": "a dog runs fast", **reading},
        ],
        "beam": {
            "steps": STEPS,
            "vocab": VOCAB,
            "chosen": {"tokens": CHOSEN, "score": -0.5, "normalized": -0.4, "text": "a dog"},
            "options": {"beam_size": 2, "alpha": 0.6, "penalty": "gnmt", "max_len_b": 50},
        },
    }


# Two validations of uneven sizes, as after a resume that changed num_sentences: the earlier one
# holds the first sentence only, its encoder's layer 1 head 1 the anti-diagonal.
VALIDATIONS = [
    {"step": 100, "sentences": [sentence("ein Hund rennt schnell", ANTI)]},
    {"step": 200, "sentences": [sentence("ein Hund rennt schnell", EYE),
                                sentence("zwei Hunde", EYE)]},
]  # fmt: skip


# ---- controls ----
def choose(driver, **controls: str) -> None:
    for control, value in controls.items():
        Select(driver.find_element(By.ID, control)).select_by_value(value)


def read_map(picture: np.ndarray, rows: list[Box], cols: list[Box], scale: dict) -> np.ndarray:
    """(rows, cols) of 0, 1 or -1 (neither end of the scale) from the cell centres' colours."""
    out = np.full((len(rows), len(cols)), -1)
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            colour = pixel(picture, c.cx, r.cy)
            out[i, j] = 1 if near(colour, scale[1.0]) else 0 if near(colour, scale[0.0]) else -1
    return out


def small_maps(driver, picture: np.ndarray, layer: str) -> dict[str, np.ndarray]:
    """Each small map of a grid row, by its caption: (N, N) pixels at the cells' centres."""
    (label,) = [b for b in boxes(driver, "#grid .grid-label") if b.text == layer]
    figures = [b for b in boxes(driver, "#grid figure") if b.y <= label.cy <= b.y + b.h]
    captions = boxes(driver, "#grid figcaption")
    maps = {}
    for figure in sorted(figures, key=lambda b: b.x):
        (caption,) = [c for c in captions if figure.x <= c.cx <= figure.x + figure.w
                      and figure.y <= c.cy <= figure.y + figure.h]  # fmt: skip
        found = ink_box(
            picture, figure.x, caption.y + caption.h, figure.x + figure.w, figure.y + figure.h
        )
        assert found is not None, f"{layer} {caption.text}: nothing drawn"
        left, top, right, bottom = found
        xs = left + (np.arange(N) + 0.5) * (right - left) / N
        ys = top + (np.arange(N) + 0.5) * (bottom - top) / N
        maps[caption.text] = np.array([[pixel(picture, x, y) for x in xs] for y in ys])
    return maps


def is_map(cells: np.ndarray, expected: np.ndarray, scale: dict) -> bool:
    hot = np.array([[near(c, scale[1.0]) for c in row] for row in cells])
    cold = np.array([[near(c, scale[0.0]) for c in row] for row in cells])
    return bool((hot == (expected == 1)).all() and (cold == (expected == 0)).all())


# ---- the picture checks: each sets the controls it reads ----
def check_legend_ends(driver) -> None:
    picture = shot(driver)
    y, left, right, ticks = legend_band(driver, picture)
    values = [float(t.text) for t in ticks]
    assert values == sorted(values) and values[0] == 0 and values[-1] == 1, values
    # The labels 0 and 1 stand at the ends of the coloured band, and the band runs 0 -> 1.
    assert abs(ticks[0].cx - left) <= 3 and abs(ticks[-1].cx - right) <= 3, (ticks, left, right)
    assert near(pixel(picture, left + 1, y), VIRIDIS_0), pixel(picture, left + 1, y)
    assert near(pixel(picture, right - 2, y), VIRIDIS_1), pixel(picture, right - 2, y)


def check_small_maps(driver) -> None:
    choose(driver, kind="encoder_self")
    picture = shot(driver)
    scale = legend(driver, picture)
    maps = small_maps(driver, picture, "layer 1")
    assert list(maps) == ["h1", "h2", "mean"]
    assert is_map(maps["h1"], EYE, scale), "layer 1 h1 is not the diagonal"
    assert is_map(maps["h2"], ANTI, scale), "layer 1 h2 is not the anti-diagonal"
    assert near(maps["mean"][0, 0], scale[0.5]), "the mean of 1 and 0 is not the legend's 0.5"
    layer2 = small_maps(driver, picture, "layer 2")
    assert is_map(layer2["h1"], EYE[[1] * N], scale), "layer 2 h1 is not column 2"


def check_large_map(driver) -> None:
    for kind, layer, head, expected in (
        ("encoder_self", "0", "0", EYE),
        ("encoder_self", "0", "1", ANTI),
        ("decoder_src", "0", "1", ONE_HOT),
        ("decoder_src", "0", "0", PERM),
    ):
        choose(driver, kind=kind, layer=layer, head=head)
        picture = shot(driver)
        shown = read_map(picture, *large_cells(driver), legend(driver, picture))
        assert (shown == expected).all(), f"{kind} layer {layer} head {head}:\n{shown}"


def check_labels_in_order(driver) -> None:
    for kind, rows_expected, cols_expected in (
        ("decoder_src", OUT, SRC),
        ("encoder_self", SRC, SRC),
        ("decoder_self", OUT, TGT),
    ):
        choose(driver, kind=kind)
        rows, cols = large_cells(driver)
        assert [b.text for b in rows] == rows_expected, kind
        assert [b.text for b in cols] == cols_expected, kind
    src, tgt = alignment_tokens(driver)
    assert [b.text for b in src] == SRC
    assert [b.text for b in tgt] == OUT  # the same row labels as the large map's


def alignment_tokens(driver) -> tuple[list[Box], list[Box]]:
    """The translation's alignment: source tokens (the upper line) and target tokens."""
    figure = boxes(driver, "#alignments > *")[0]
    tokens = boxes(driver, "#alignments .token")
    inside = [b for b in tokens if figure.y <= b.cy <= figure.y + figure.h]
    top = min(b.y for b in inside)
    src = sorted((b for b in inside if b.y < top + 10), key=lambda b: b.x)
    tgt = sorted((b for b in inside if b.y >= top + 10), key=lambda b: b.x)
    return src, tgt


def link_crossings(driver) -> tuple[list[float], Callable[[int, int], float]]:
    """Where the drawn links cross the middle line between the source and target tokens, and
    where the link of target i and source j would."""
    picture = shot(driver)
    src, tgt = alignment_tokens(driver)
    y = (src[0].y + src[0].h + tgt[0].y) / 2
    crossings = ink_runs(picture, y, 0, picture.shape[1])
    return crossings, lambda i, j: (src[j].cx + tgt[i].cx) / 2


def check_alignment_links(driver) -> None:
    choose(driver, layer="0", head="0", links="half")
    crossings, at = link_crossings(driver)
    expected = sorted(at(i, j) for i, j in enumerate(PERMUTATION))
    assert len(crossings) == N and np.allclose(crossings, expected, atol=4), (crossings, expected)
    choose(driver, head="1")
    crossings, at = link_crossings(driver)
    assert len(crossings) == 1 and abs(crossings[0] - at(*HOT)) <= 4, crossings


def check_adaptive_links(driver) -> None:
    choose(driver, layer="1", head="1", links="half")  # no weight reaches 0.1
    crossings, at = link_crossings(driver)
    expected = sorted(at(i, j) for i, j in enumerate(PERMUTATION))
    assert len(crossings) == N and np.allclose(crossings, expected, atol=4), crossings
    assert "half its largest" in driver.find_element(By.ID, "links-note").text
    choose(driver, links="fixed")
    assert link_crossings(driver)[0] == []
    assert "at least 0.1" in driver.find_element(By.ID, "links-note").text
    choose(driver, links="half")


def check_hover_band(driver) -> None:
    choose(driver, kind="decoder_src", layer="0", head="0")
    rows, cols = large_cells(driver)
    ActionChains(driver).move_to_element(driver.find_element(By.TAG_NAME, "h1")).perform()
    before = shot(driver)
    hovered = driver.find_elements(By.CSS_SELECTOR, "#large .col-label")[2]
    ActionChains(driver).move_to_element(hovered).perform()
    after = shot(driver)
    ActionChains(driver).move_to_element(driver.find_element(By.TAG_NAME, "h1")).perform()
    changed = np.abs(after - before).max(axis=-1) > 40
    top, bottom = int(rows[0].y), int(rows[-1].y + rows[-1].h)
    left, right = int(cols[0].x), int(cols[-1].x + cols[-1].w)
    ys, xs = np.nonzero(changed[top:bottom, left:right])
    cell = cols[1].cx - cols[0].cx
    # The hovered source token's column, all its rows, and nothing else of the map.
    assert len(xs), "hovering drew nothing"
    drawn = (left + xs.min(), left + xs.max())
    assert np.allclose(drawn, (cols[2].cx - cell / 2, cols[2].cx + cell / 2), atol=3), drawn
    assert ys.min() <= 3 and ys.max() >= bottom - top - 4, (ys.min(), ys.max())


def node_edges(picture: np.ndarray, text: Box) -> tuple[int, int]:
    """(left, right) of the drawn box around a text: where the background starts either side,
    along a row near its top, above where edges join the box."""
    y = int(round(text.y + 1))
    inked = np.abs(picture[y] - BACKGROUND).max(axis=-1) > 8
    left, right = int(text.x), int(text.x + text.w)
    while left > 0 and inked[left - 1]:
        left -= 1
    while right < len(inked) - 1 and inked[right + 1]:
        right += 1
    return left, right


def check_beam_tree(driver) -> None:
    picture = shot(driver)
    view = boxes(driver, "#beam-view")[0]
    texts = [b for b in boxes(driver, "#beam-view *") if b.text and view.y <= b.y]

    def node(text: str) -> Box:
        found = [b for b in texts if b.text == text]
        assert len(found) == 1, f"{len(found)} nodes {text!r}"
        return found[0]

    def chip(status: str) -> np.ndarray:
        (b,) = boxes(driver, f"#beam-view .hint .{status}")
        return pixel(picture, b.x + 3, b.cy)

    colours = {"k": chip("kept"), "f": chip("finished"), "p": chip("pruned")}
    parents = [node("<s>")]
    for t, step in enumerate(STEPS):
        kept = []
        for parent, token, score, status, normalized in step:
            label = f"{VOCAB[str(token)]} {score:.2f}"
            child = node(label if normalized is None else f"{label} → {normalized:.2f}")
            left, _ = node_edges(picture, child)
            assert near(pixel(picture, left + 5, child.cy), colours[status], 8), f"{label}: colour"
            source = parents[0 if t == 0 else parent]
            _, source_right = node_edges(picture, source)
            assert source_right < left, f"{label}: not right of its parent"
            # The edge between them: ink halfway from the parent's box to the child's.
            mid = ((source_right + left) / 2, (source.cy + child.cy) / 2)
            around = (mid[0] - 4, mid[1] - 4, mid[0] + 5, mid[1] + 5)
            assert ink_box(picture, *around), f"{label}: no edge"
            if status == "k":
                kept.append(child)
        parents = kept
    # The chosen translation's path is outlined in the highlight colour, the others are not.
    for label, chosen in (("</s> -0.50 → -0.40", True), ("</s> -1.40 → -1.20", False)):
        box = node(label)
        left, _ = node_edges(picture, box)
        outline = any(near(pixel(picture, x, box.cy), HIGHLIGHT, 60) for x in range(left, left + 3))
        assert outline == chosen, f"{label}: outlined {outline}"


def check_uneven_validations(driver) -> None:
    choose(driver, sentence="1", kind="encoder_self", layer="0", head="0")
    slider = driver.find_element(By.ID, "validation")
    slider.send_keys(Keys.ARROW_LEFT)
    assert driver.find_element(By.ID, "step").text == "step 100"
    chosen = Select(driver.find_element(By.ID, "sentence")).first_selected_option
    assert chosen.text.startswith("1:")
    picture = shot(driver)
    shown = read_map(picture, *large_cells(driver), legend(driver, picture))
    assert (shown == ANTI).all(), f"validation at step 100 not shown:\n{shown}"
    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == [], severe


CHECKS = {
    check.__name__.removeprefix("check_"): check
    for check in (
        check_legend_ends, check_small_maps, check_large_map, check_labels_in_order,
        check_alignment_links, check_adaptive_links, check_hover_band, check_beam_tree,
        check_uneven_validations,
    )
}  # fmt: skip


# ---- the page, whole and broken ----
def page(tmp_path: Path, name: str, change: Callable[[str], str] = lambda html: html) -> Path:
    path = tmp_path / f"{name}.html"
    path.write_text(change(explorer_html(VALIDATIONS, "known picture")), encoding="utf-8")
    return path


def script(*patches: tuple[str, str]) -> Callable[[str], str]:
    """A patched copy of explorer.js: each (old, new); a patch must still find its one place."""

    def change(html: str) -> str:
        for old, new in patches:
            assert html.count(old) == 1, f"the mutation no longer applies: {old!r}"
            html = html.replace(old, new)
        return html

    return change


def style(css: str) -> Callable[[str], str]:
    return lambda html: html.replace("</style>", f"{css}</style>", 1)


COLUMNS = 'colLabels.forEach((t, j) => label("col", j, t, 0, j + 1));'
HEAD = "const base = (layer * h + head) * tq * tk;"
HALF = "else kept = order.slice(0, 3).filter((j) => top > 0 && row[j] >= top / 2);"
SAME_SOURCE = "state.s = same >= 0 ? same : Math.min(state.s, sentences().length - 1);"
CLAMPED = "state.s = Math.max(0, Math.min(state.s, sentences().length - 1));"
# name: (how the page is broken, the check that must catch it)
MUTATIONS = {
    "blank maps": (script(("ctx.putImageData(image, 0, 0);", "")), "small_maps"),
    "blank large map": (style("#large canvas { visibility: hidden }"), "large_map"),
    "no links": (style("#alignments line { display: none }"), "alignment_links"),
    "reversed labels": (
        script((COLUMNS, COLUMNS.replace("j, t,", "j, colLabels[colLabels.length - 1 - j],"))),
        "labels_in_order",
    ),
    "rows by decoder input": (
        script(("decoder_src: [out, src]", "decoder_src: [rd.tgt, src]")),
        "labels_in_order",
    ),
    "inverted scale": (
        script(("map((q) => rgb(weightOf(q)))", "map((q) => rgb(1 - weightOf(q)))")),
        "large_map",
    ),
    "wrong head": (script((HEAD, HEAD.replace("+ head)", "+ (head + 1) % h)"))), "small_maps"),
    "transposed maps": (
        script(("at = 4 * k;", "at = 4 * ((k % tk) * tq + Math.floor(k / tk));")),
        "large_map",
    ),
    "head captions off by one": (script(("`h${h + 1}`", "`h${h + 2}`")), "small_maps"),
    "legend reversed": (style("#legend-bar { transform: scaleX(-1) }"), "legend_ends"),
    "legend labels moved": (style("#legend-ticks .tick { margin-left: 20px }"), "legend_ends"),
    "links to the neighbour word": (
        script(('<line x1="${x(j)}"', '<line x1="${x(j + 1)}"')),
        "alignment_links",
    ),
    "fixed 0.1 threshold": (
        script((HALF, "else kept = order.filter((j) => row[j] >= 0.1);")),
        "adaptive_links",
    ),
    "wrong column lit": (
        script(("at(band.col, 1, k + 1, tq, 1)", "at(band.col, 1, k + 2, tq, 1)")),
        "hover_band",
    ),
    "missing beam": (script(("const rows = beamRows();", "const rows = [];")), "beam_tree"),
    "pruned drawn as kept": (style("#beam-tree .pruned rect { fill: #c8f0c6 }"), "beam_tree"),
    "tree without edges": (style("#beam-tree .edge { display: none }"), "beam_tree"),
    "slider stuck": (script(('number("validation", "v", "input");', "")), "uneven_validations"),
    "sentence kept past the validation's end": (
        script((SAME_SOURCE, ""), (CLAMPED, "")),
        "uneven_validations",
    ),
}


@pytest.fixture(scope="module")
def browser():
    with chromium() as driver:
        yield driver


@pytest.fixture(scope="module")
def known(browser, tmp_path_factory):
    path = page(tmp_path_factory.mktemp("known"), "known")
    loaded = load(browser, path)
    assert loaded.console == [] and loaded.requests == []
    return path


@pytest.mark.parametrize("name", CHECKS)
def test_the_known_picture_is_drawn(browser, known, name):
    load(browser, known)
    CHECKS[name](browser)


def test_the_mutation_check_breaks_the_page_in_many_ways():
    assert len(MUTATIONS) >= 10
    assert set(CHECKS) == {check for _, check in MUTATIONS.values()}  # each check catches one


@pytest.mark.parametrize("name", MUTATIONS)
def test_a_broken_page_is_caught(browser, tmp_path, name):
    change, check = MUTATIONS[name]
    load(browser, page(tmp_path, "broken", change))
    with pytest.raises(AssertionError):
        CHECKS[check](browser)
