"use strict";
// The explorer: reads the inlined JSON, draws the chosen validation, sentence, kind, layer and
// head, and redraws on every control. No network: everything it needs is in this file.
(() => {
  const data = JSON.parse(document.getElementById("data").textContent);
  const KINDS = {
    encoder_self: "encoder self-attention",
    decoder_self: "decoder self-attention (masked)",
    decoder_src: "encoder-decoder attention",
  };
  const MEAN = -1; // the head index of the heads' mean
  const state = { v: data.validations.length - 1, s: 0, r: 0, kind: "decoder_src", layer: 0, head: 0 };
  const $ = (id) => document.getElementById(id);
  const el = (tag, attrs = {}, text = "") => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text) e.textContent = text;
    return e;
  };
  const svgEl = (tag, attrs) => {
    const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    return e;
  };

  // ---- data ----
  const decoded = new WeakMap();
  function values(encoded) {
    // base64 of little-endian uint16 steps of 1/65535 (explorer/sentence.py)
    if (!decoded.has(encoded)) {
      const bin = atob(encoded.data);
      const out = new Float32Array(bin.length / 2);
      for (let i = 0; i < out.length; i++) {
        out[i] = (bin.charCodeAt(2 * i) | (bin.charCodeAt(2 * i + 1) << 8)) / 65535;
      }
      decoded.set(encoded, out);
    }
    return decoded.get(encoded);
  }
  const sentence = (v = state.v, s = state.s) => data.validations[v].sentences[s];
  const reading = (v = state.v, s = state.s, r = state.r) =>
    sentence(v, s).readings[Math.min(r, sentence(v, s).readings.length - 1)];
  function encodedOf(v, s, r, kind) {
    return kind === "encoder_self" ? sentence(v, s).encoder_self : reading(v, s, r)[kind];
  }
  function axes(v, s, r, kind) {
    const src = sentence(v, s).src, tgt = reading(v, s, r).tgt;
    return { encoder_self: [src, src], decoder_self: [tgt, tgt], decoder_src: [tgt, src] }[kind];
  }
  // (T_q, T_k) weights of one layer and head, or the heads' mean, as nested arrays.
  function matrix(v, s, r, kind, layer, head) {
    const encoded = encodedOf(v, s, r, kind);
    const [, h, tq, tk] = encoded.shape;
    const w = values(encoded);
    const heads = head === MEAN ? [...Array(h).keys()] : [head];
    const rows = [];
    for (let i = 0; i < tq; i++) {
      const row = new Array(tk).fill(0);
      for (const hd of heads) {
        const base = ((layer * h + hd) * tq + i) * tk;
        for (let j = 0; j < tk; j++) row[j] += w[base + j] / heads.length;
      }
      rows.push(row);
    }
    return rows;
  }
  // Each finished hypothesis of a sentence's beam search: the ids, as the search built them.
  function beamRows(v = state.v, s = state.s) {
    const beam = sentence(v, s).beam;
    let beams = null;
    return beam.steps.map((step) => {
      const kept = [];
      const row = step.map(([parent, token, score, status, normalized]) => {
        const ids = beams === null ? [token] : [...beams[parent], token];
        if (status === "k") kept.push(ids);
        return { ids, score, status, normalized };
      });
      beams = kept;
      return row;
    });
  }
  const finished = (v, s) => beamRows(v, s).flat().filter((c) => c.status === "f");

  // ---- drawing ----
  const STOPS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  function colour(w) {
    // viridis, as the PNG heatmaps: 0 dark purple, 1 yellow
    const x = Math.max(0, Math.min(1, w)) * (STOPS.length - 1);
    const i = Math.min(Math.floor(x), STOPS.length - 2), f = x - i;
    const c = STOPS[i].map((a, k) => Math.round(a + f * (STOPS[i + 1][k] - a)));
    return `rgb(${c[0]},${c[1]},${c[2]})`;
  }
  const shape = (kind) => encodedOf(state.v, state.s, state.r, kind).shape;
  const headName = (h) => (h === MEAN ? "mean" : `head ${h + 1}`);

  function drawGrid() {
    const grid = $("grid");
    grid.replaceChildren();
    const [layers, h, tq, tk] = shape(state.kind);
    const cell = Math.max(1, Math.floor(64 / Math.max(tq, tk)));
    for (let l = 0; l < layers; l++) {
      const row = el("div", { class: "grid-row" });
      row.append(el("span", { class: "grid-label" }, `layer ${l + 1}`));
      for (const hd of [...Array(h).keys(), ...(h > 1 ? [MEAN] : [])]) {
        const canvas = el("canvas", { width: tk * cell, height: tq * cell, title: `layer ${l + 1}, ${headName(hd)}` });
        canvas.className = l === state.layer && hd === state.head ? "small selected" : "small";
        canvas.dataset.layer = l;
        canvas.dataset.head = hd;
        const ctx = canvas.getContext("2d");
        matrix(state.v, state.s, state.r, state.kind, l, hd).forEach((ws, i) =>
          ws.forEach((w, j) => {
            ctx.fillStyle = colour(w);
            ctx.fillRect(j * cell, i * cell, cell, cell);
          }));
        canvas.addEventListener("click", () => set({ layer: l, head: hd }));
        row.append(canvas);
      }
      grid.append(row);
    }
  }

  function drawLarge() {
    const large = $("large");
    large.replaceChildren();
    const [rowsLabels, colLabels] = axes(state.v, state.s, state.r, state.kind);
    const m = matrix(state.v, state.s, state.r, state.kind, state.layer, state.head);
    const self = state.kind !== "decoder_src";
    large.style.gridTemplateColumns = `auto repeat(${colLabels.length}, 18px)`;
    large.append(el("div", { class: "corner" }, `layer ${state.layer + 1}, ${headName(state.head)}`));
    const cells = m.map(() => []);
    // A token's row is what it attends to, its column what attends to it; a self-attention's
    // token is both a row and a column.
    const hover = (axis, i) => (on) => {
      for (const [a, k] of self ? [["row", i], ["col", i]] : [[axis, i]]) {
        const line = a === "row" ? cells[k] : cells.map((r) => r[k]);
        line.forEach((c) => c.classList.toggle("hl", on));
        large.querySelector(`.${a}-label[data-index="${k}"]`).classList.toggle("hl", on);
      }
    };
    const label = (axis, i, text) => {
      const e = el("div", { class: `${axis}-label token`, "data-index": i }, text);
      const h = hover(axis, i);
      e.addEventListener("mouseenter", () => h(true));
      e.addEventListener("mouseleave", () => h(false));
      return e;
    };
    colLabels.forEach((t, j) => large.append(label("col", j, t)));
    m.forEach((ws, i) => {
      large.append(label("row", i, rowsLabels[i]));
      ws.forEach((w, j) => {
        const c = el("div", { class: "cell", title: `${rowsLabels[i]} → ${colLabels[j]}: ${w.toFixed(3)}` });
        c.style.background = colour(w);
        c.dataset.w = w.toFixed(4);
        cells[i].push(c);
        large.append(c);
      });
    });
  }

  function drawAlignments() {
    const box = $("alignments");
    box.replaceChildren();
    const layers = shape("decoder_src")[0];
    if (!layers) return;
    const layer = Math.min(state.layer, layers - 1);
    const head = state.head >= shape("decoder_src")[1] ? MEAN : state.head;
    const src = sentence().src, gap = 64;
    sentence().readings.forEach((rd, r) => {
      // Row i of the encoder-decoder attention predicts the i-th target token: the decoder's
      // input shifted by one, ending in EOS.
      const out = [...rd.tgt.slice(1), "</s>"];
      const m = matrix(state.v, state.s, r, "decoder_src", layer, head);
      const width = gap * Math.max(src.length, out.length) + gap;
      const fig = el("figure", { class: `alignment ${rd.name}` });
      fig.append(el("figcaption", {}, `${rd.name}: ${rd.text}`));
      const svg = svgEl("svg", { width, height: 150, viewBox: `0 0 ${width} 150` });
      const x = (i) => gap / 2 + gap * i + gap / 2;
      const links = [];
      m.forEach((ws, i) => ws.forEach((w, j) => {
        if (w < 0.1) return;
        const line = svgEl("line", { x1: x(j), y1: 28, x2: x(i), y2: 118, "stroke-width": 1 + 4 * w, "stroke-opacity": w });
        line.dataset.src = j;
        line.dataset.tgt = i;
        links.push(line);
        svg.append(line);
      }));
      const token = (side, i, text, y) => {
        const t = svgEl("text", { x: x(i), y, "text-anchor": "middle", class: `token ${side}` });
        t.textContent = text;
        t.addEventListener("mouseenter", () => {
          svg.classList.add("focus");
          links.forEach((l) => l.classList.toggle("hl", l.dataset[side] === String(i)));
        });
        t.addEventListener("mouseleave", () => svg.classList.remove("focus"));
        svg.append(t);
      };
      src.forEach((t, j) => token("src", j, t, 18));
      out.forEach((t, i) => token("tgt", i, t, 138));
      fig.append(svg);
      box.append(fig);
    });
  }

  function drawBeam() {
    const beam = sentence().beam, vocab = beam.vocab;
    const chosen = JSON.stringify(beam.chosen.tokens);
    const text = (ids) => ids.map((i) => vocab[i]).join(" ");
    $("chosen").replaceChildren(
      "chosen: ", el("span", { id: "chosen-text" }, beam.chosen.text),
      " score ", el("span", { id: "chosen-score" }, beam.chosen.score.toFixed(4)),
      " normalized ", el("span", { id: "chosen-normalized" }, beam.chosen.normalized.toFixed(4)),
      el("span", { class: "options" }, ` (beam ${beam.options.beam_size}, alpha ${beam.options.alpha}, ${beam.options.penalty})`),
    );
    const table = $("beam");
    table.replaceChildren();
    beamRows().forEach((row, t) => {
      const tr = el("tr");
      tr.append(el("th", {}, `step ${t + 1}`));
      const td = el("td");
      for (const c of row) {
        const status = { k: "kept", f: "finished", p: "pruned" }[c.status];
        const normalized = c.status === "f" ? ` → ${c.normalized.toFixed(4)}` : "";
        const chip = el("span", { class: `chip ${status}` }, `${text(c.ids)} ${c.score.toFixed(4)}${normalized}`);
        if (c.status === "f" && JSON.stringify(c.ids) === chosen) chip.classList.add("chosen");
        chip.dataset.ids = JSON.stringify(c.ids);
        td.append(chip);
      }
      tr.append(td);
      table.append(tr);
    });
  }

  // ---- controls ----
  function options(select, items, value) {
    select.replaceChildren(...items.map(([v, t]) => el("option", { value: v }, t)));
    select.value = value;
  }
  function clamp() {
    const kinds = Object.keys(KINDS).filter((k) => encodedOf(state.v, state.s, state.r, k).shape[0] > 0);
    if (!kinds.includes(state.kind)) state.kind = kinds[kinds.length - 1];
    const [layers, h] = shape(state.kind);
    state.layer = Math.min(state.layer, layers - 1);
    if (state.head >= h || (h === 1 && state.head === MEAN)) state.head = 0;
    return kinds;
  }
  function drawControls(kinds) {
    const validations = data.validations;
    $("validation-control").hidden = validations.length < 2;
    $("validation").max = validations.length - 1;
    $("validation").value = state.v;
    const step = validations[state.v].step;
    $("step").textContent = step === null ? "" : `step ${step}`;
    options($("sentence"), validations[state.v].sentences.map((x, i) => [i, `${i + 1}: ${x.source}`]), state.s);
    options($("reading"), sentence().readings.map((x, i) => [i, x.name]), Math.min(state.r, sentence().readings.length - 1));
    options($("kind"), kinds.map((k) => [k, KINDS[k]]), state.kind);
    const [layers, h] = shape(state.kind);
    options($("layer"), [...Array(layers).keys()].map((l) => [l, l + 1]), state.layer);
    options($("head"), [...[...Array(h).keys()].map((x) => [x, x + 1]), ...(h > 1 ? [[MEAN, "mean"]] : [])], state.head);
    $("source").textContent = sentence().source;
  }
  function render() {
    const kinds = clamp();
    drawControls(kinds);
    drawGrid();
    drawLarge();
    drawAlignments();
    drawBeam();
  }
  function set(changes) {
    Object.assign(state, changes);
    render();
  }
  // A select fires "change" however it is chosen; a slider fires "input" while it moves.
  const number = (id, key, event = "change") =>
    $(id).addEventListener(event, (e) => set({ [key]: Number(e.target.value) }));
  number("validation", "v", "input");
  number("sentence", "s");
  number("reading", "r");
  number("layer", "layer");
  number("head", "head");
  $("kind").addEventListener("change", (e) => set({ kind: e.target.value }));

  render();
  // For tests and the curious: the data as the page reads it.
  // readyAt: milliseconds from the start of navigation to the first drawing done.
  window.explorer = { data, state, set, matrix, finished, MEAN, ready: true, readyAt: performance.now() };
})();
