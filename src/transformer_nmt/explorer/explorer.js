"use strict";
// The explorer: reads the inlined JSON, draws the chosen validation, sentence, kind, layer and
// head, and redraws what a control changes. No network: everything it needs is in this file.
// Maps are canvases of one pixel per weight, scaled up by CSS, so that a long sentence's maps
// cost one image each rather than a DOM element per cell.
(async () => {
  const data = JSON.parse(document.getElementById("data").textContent);
  const KINDS = {
    encoder_self: "encoder self-attention",
    decoder_self: "decoder self-attention (masked)",
    decoder_src: "encoder-decoder attention",
  };
  const MEAN = -1; // the head index of the heads' mean
  const LINKS = {
    half: "each target token's links to the source tokens given at least half its largest weight (at most 3)",
    max: "each target token's link to the source token given its largest weight",
    fixed: "every link of weight at least 0.1",
  };
  const state = { v: data.validations.length - 1, s: 0, r: 0, kind: "decoder_src", layer: 0, head: 0, links: "half" };
  const $ = (id) => document.getElementById(id);
  const el = (tag, attrs = {}, text = "") => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== "") e.textContent = text;
    return e;
  };
  const svgEl = (tag, attrs, text = "") => {
    const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== "") e.textContent = text;
    return e;
  };

  // ---- data ----
  // Each weight w travels as q = round(255 sqrt(w)), deflated then base64 (explorer/sentence.py).
  const levels = new WeakMap();
  async function inflate(encoded) {
    if (!encoded.data) return new Uint8Array(0);
    const text = atob(encoded.data), bytes = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }
  const everyEncoded = data.validations.flatMap((v) => v.sentences.flatMap((s) =>
    [s.encoder_self, ...s.readings.flatMap((r) => [r.decoder_self, r.decoder_src])]));
  await Promise.all(everyEncoded.map(async (e) => levels.set(e, await inflate(e))));
  const weightOf = (q) => (q / 255) ** 2;
  const WEIGHT = Float32Array.from({ length: 256 }, (_, q) => weightOf(q));
  const levelOf = (w) => Math.round(255 * Math.sqrt(Math.max(0, Math.min(1, w))));

  const sentences = (v = state.v) => data.validations[v].sentences;
  const sentence = (v = state.v, s = state.s) => sentences(v)[s];
  const reading = (v = state.v, s = state.s, r = state.r) =>
    sentence(v, s).readings[Math.min(r, sentence(v, s).readings.length - 1)];
  function encodedOf(v, s, r, kind) {
    return kind === "encoder_self" ? sentence(v, s).encoder_self : reading(v, s, r)[kind];
  }
  // Labels of the rows and columns. A target row is labelled by the token predicted there (its
  // input is the token before), in every view; decoder self-attention's columns are what it reads.
  function axes(v, s, r, kind) {
    const src = sentence(v, s).src, rd = reading(v, s, r);
    const out = rd.out ?? [...rd.tgt.slice(1), "</s>"]; // a page written before "out"
    return { encoder_self: [src, src], decoder_self: [out, rd.tgt], decoder_src: [out, src] }[kind];
  }
  // The model's 1-based number of each stored layer (a page may hold some layers only).
  const layerNumbers = (v = state.v, s = state.s) =>
    sentence(v, s).layers ?? [...Array(encodedOf(v, s, state.r, state.kind).shape[0]).keys()].map((l) => l + 1);
  // (T_q * T_k) weights of one layer (an index into the stored layers) and head, or the heads'
  // mean, row-major.
  function weights(v, s, r, kind, layer, head) {
    const encoded = encodedOf(v, s, r, kind);
    const [, h, tq, tk] = encoded.shape;
    const q = levels.get(encoded);
    const heads = head === MEAN ? [...Array(h).keys()] : [head];
    const out = new Float32Array(tq * tk);
    for (const hd of heads) {
      const base = (layer * h + hd) * tq * tk;
      for (let k = 0; k < tq * tk; k++) out[k] += WEIGHT[q[base + k]] / heads.length;
    }
    return out;
  }
  // The same as levels, one byte a cell: a head's are the data themselves, a view not a copy.
  function levelsOf(v, s, r, kind, layer, head) {
    const encoded = encodedOf(v, s, r, kind);
    const [, h, tq, tk] = encoded.shape;
    if (head !== MEAN) {
      const base = (layer * h + head) * tq * tk;
      return levels.get(encoded).subarray(base, base + tq * tk);
    }
    return Uint8Array.from(weights(v, s, r, kind, layer, head), levelOf);
  }
  function matrix(v, s, r, kind, layer, head) {
    const [, , tq, tk] = encodedOf(v, s, r, kind).shape;
    const w = weights(v, s, r, kind, layer, head);
    return [...Array(tq).keys()].map((i) => Array.from(w.subarray(i * tk, (i + 1) * tk)));
  }
  // Each candidate of every step of a sentence's beam search, with the ids of its prefix.
  function beamRows(v = state.v, s = state.s) {
    const beam = sentence(v, s).beam;
    let beams = null;
    return beam.steps.map((step) => {
      const kept = [];
      const row = step.map(([parent, token, score, status, normalized]) => {
        const ids = beams === null ? [token] : [...beams[parent], token];
        if (status === "k") kept.push(ids);
        return { parent, ids, score, status, normalized };
      });
      beams = kept;
      return row;
    });
  }
  const finished = (v, s) => beamRows(v, s).flat().filter((c) => c.status === "f");

  // ---- colour ----
  const STOPS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  function rgb(w) {
    // viridis, as the PNG heatmaps: 0 dark purple, 1 yellow
    const x = Math.max(0, Math.min(1, w)) * (STOPS.length - 1);
    const i = Math.min(Math.floor(x), STOPS.length - 2), f = x - i;
    return STOPS[i].map((a, k) => Math.round(a + f * (STOPS[i + 1][k] - a)));
  }
  const PALETTE = [...Array(256).keys()].map((q) => rgb(weightOf(q)));

  // A (tq, tk) map of levels into `canvas`, one pixel per weight.
  function paint(canvas, q, tq, tk) {
    canvas.width = tk;
    canvas.height = tq;
    const ctx = canvas.getContext("2d");
    const image = ctx.createImageData(tk, tq);
    for (let k = 0; k < tq * tk; k++) {
      const c = PALETTE[q[k]], at = 4 * k;
      image.data[at] = c[0];
      image.data[at + 1] = c[1];
      image.data[at + 2] = c[2];
      image.data[at + 3] = 255;
    }
    ctx.putImageData(image, 0, 0);
  }

  function drawLegend() {
    const bar = $("legend-bar"), ctx = bar.getContext("2d");
    for (let x = 0; x < bar.width; x++) {
      const [r, g, b] = rgb(x / (bar.width - 1));
      ctx.fillStyle = `rgb(${r},${g},${b})`;
      ctx.fillRect(x, 0, 1, bar.height);
    }
    const ticks = $("legend-ticks");
    ticks.replaceChildren(...[0, 0.25, 0.5, 0.75, 1].map((t) => {
      const e = el("span", { class: "tick" }, String(t));
      e.style.left = `${t * 100}%`;
      return e;
    }));
  }

  // ---- views ----
  const shape = (kind) => encodedOf(state.v, state.s, state.r, kind).shape;
  const headName = (h) => (h === MEAN ? "mean" : `head ${h + 1}`);
  const headLabel = (h) => (h === MEAN ? "mean" : `h${h + 1}`);

  function drawGrid() {
    const grid = $("grid");
    grid.replaceChildren();
    const [layers, h, tq, tk] = shape(state.kind);
    const numbers = layerNumbers();
    // Small maps of at least 48 px a side, whole pixels per weight while they fit in 96.
    const scale = Math.max(1, Math.floor(96 / Math.max(tq, tk)));
    for (let l = 0; l < layers; l++) {
      const row = el("div", { class: "grid-row" });
      row.append(el("span", { class: "grid-label" }, `layer ${numbers[l]}`));
      for (const hd of [...Array(h).keys(), ...(h > 1 ? [MEAN] : [])]) {
        const fig = el("figure", { class: "small-map", title: `layer ${numbers[l]}, ${headName(hd)}` });
        fig.dataset.layer = l;
        fig.dataset.head = hd;
        fig.classList.toggle("selected", l === state.layer && hd === state.head);
        fig.append(el("figcaption", {}, headLabel(hd)));
        const canvas = el("canvas", { class: "small" });
        paint(canvas, levelsOf(state.v, state.s, state.r, state.kind, l, hd), tq, tk);
        canvas.style.width = `${Math.max(48, tk * scale)}px`;
        canvas.style.height = `${Math.max(48, tk * scale) * tq / tk}px`;
        fig.append(canvas);
        fig.addEventListener("click", () => set({ layer: l, head: hd }));
        row.append(fig);
      }
      grid.append(row);
    }
  }
  function markSelected() {
    for (const fig of $("grid").querySelectorAll(".small-map")) {
      fig.classList.toggle("selected", Number(fig.dataset.layer) === state.layer && Number(fig.dataset.head) === state.head);
    }
  }

  // The large map: its labels are rebuilt only when the tokens change (relabel), the picture
  // on every call.
  const large = { canvas: null, corner: null, q: null };
  function drawLarge(relabel = true) {
    const [rowLabels, colLabels] = axes(state.v, state.s, state.r, state.kind);
    const [, , tq, tk] = shape(state.kind);
    if (relabel || !large.canvas) labelLarge(rowLabels, colLabels, tq, tk);
    large.q = levelsOf(state.v, state.s, state.r, state.kind, state.layer, state.head);
    paint(large.canvas, large.q, tq, tk);
    large.corner.textContent = `layer ${layerNumbers()[state.layer]}, ${headName(state.head)}`;
  }
  function labelLarge(rowLabels, colLabels, tq, tk) {
    const box = $("large");
    box.replaceChildren();
    // Cells of 18 px, smaller for long sentences, never under 10 px: a label stays legible.
    const cell = Math.max(10, Math.min(18, Math.floor(900 / Math.max(tq, tk))));
    box.style.setProperty("--cell", `${cell}px`);
    box.style.gridTemplateColumns = `auto repeat(${tk}, ${cell}px)`;
    box.style.gridTemplateRows = `auto repeat(${tq}, ${cell}px)`;
    const at = (e, row, col, rows = 1, cols = 1) => {
      e.style.gridRow = `${row + 1} / span ${rows}`;
      e.style.gridColumn = `${col + 1} / span ${cols}`;
      box.append(e);
      return e;
    };
    large.corner = at(el("div", { class: "corner" }), 0, 0);
    const canvas = at(el("canvas", { class: "map" }), 1, 1, tq, tk);
    large.canvas = canvas;
    canvas.addEventListener("mousemove", (e) => {
      const r = canvas.getBoundingClientRect();
      const i = Math.floor(((e.clientY - r.top) / r.height) * tq);
      const j = Math.floor(((e.clientX - r.left) / r.width) * tk);
      if (i >= 0 && i < tq && j >= 0 && j < tk) canvas.title = `${rowLabels[i]} → ${colLabels[j]}: ${WEIGHT[large.q[i * tk + j]].toFixed(3)}`;
    });
    const band = { row: at(el("div", { class: "band", hidden: "" }), 1, 1), col: at(el("div", { class: "band", hidden: "" }), 1, 1) };
    const labels = { row: [], col: [] };
    // A token's row is what it attends to, its column what attends to it; in a self-attention a
    // position is both a row and a column (in the decoder's, labelled by what it predicts and
    // what it reads).
    const self = state.kind !== "decoder_src";
    const hover = (axis, i) => (on) => {
      for (const [a, k] of self ? [["row", i], ["col", i]] : [[axis, i]]) {
        band[a].hidden = !on;
        if (a === "row") at(band.row, k + 1, 1, 1, tk);
        else at(band.col, 1, k + 1, tq, 1);
        labels[a][k].classList.toggle("hl", on);
      }
    };
    const label = (axis, i, text, row, col) => {
      const e = at(el("div", { class: `${axis}-label token`, "data-index": i }, text), row, col);
      const h = hover(axis, i);
      e.addEventListener("mouseenter", () => h(true));
      e.addEventListener("mouseleave", () => h(false));
      labels[axis].push(e);
    };
    colLabels.forEach((t, j) => label("col", j, t, 0, j + 1));
    rowLabels.forEach((t, i) => label("row", i, t, i + 1, 0));
  }

  // Per target row, the source columns it links to under the chosen rule.
  function links(w, tq, tk) {
    const out = [];
    for (let i = 0; i < tq; i++) {
      const row = w.subarray(i * tk, (i + 1) * tk);
      const order = [...row.keys()].sort((a, b) => row[b] - row[a]);
      const top = row[order[0]];
      let kept;
      if (state.links === "fixed") kept = order.filter((j) => row[j] >= 0.1);
      else if (state.links === "max") kept = top > 0 ? order.slice(0, 1) : [];
      else kept = order.slice(0, 3).filter((j) => top > 0 && row[j] >= top / 2);
      for (const j of kept) out.push([i, j, row[j], top]);
    }
    return out;
  }

  function drawAlignments() {
    const box = $("alignments");
    box.replaceChildren();
    const [layers, h, tq0] = shape("decoder_src");
    if (!layers || !tq0) return;
    const layer = Math.min(state.layer, layers - 1);
    const head = state.head >= h ? MEAN : state.head;
    const src = sentence().src;
    let total = 0;
    sentence().readings.forEach((rd, r) => {
      const [, , tq, tk] = rd.decoder_src.shape;
      const out = axes(state.v, state.s, r, "decoder_src")[0];
      const w = weights(state.v, state.s, r, "decoder_src", layer, head);
      const gap = Math.max(40, Math.min(64, Math.floor(1200 / Math.max(tk, tq))));
      const width = gap * Math.max(tk, tq) + gap;
      const fig = el("figure", { class: `alignment ${rd.name}` });
      fig.append(el("figcaption", {}, `${rd.name}: ${rd.text}`));
      const svg = svgEl("svg", { width, height: 150, viewBox: `0 0 ${width} 150` });
      const x = (i) => gap + gap * i;
      const parts = [];
      const found = links(w, tq, tk);
      for (const [i, j, wij, top] of found) {
        // Width and opacity by the weight relative to its row's largest, which is always seen.
        const rel = wij / top;
        parts.push(`<line x1="${x(j)}" y1="26" x2="${x(i)}" y2="124" stroke-width="${1 + 3 * rel}" stroke-opacity="${0.35 + 0.65 * rel}" data-src="${j}" data-tgt="${i}"/>`);
      }
      total += found.length;
      const token = (side, i, text, y) =>
        `<text x="${x(i)}" y="${y}" text-anchor="middle" class="token ${side}" data-side="${side}" data-index="${i}">${escape(text)}</text>`;
      src.slice(0, tk).forEach((t, j) => parts.push(token("src", j, t, 16)));
      out.slice(0, tq).forEach((t, i) => parts.push(token("tgt", i, t, 142)));
      svg.innerHTML = parts.join("");
      // Hovering a token lights its links, dims the others.
      svg.addEventListener("mouseover", (e) => {
        const t = e.target.closest(".token");
        if (!t) return;
        svg.classList.add("focus");
        for (const l of svg.querySelectorAll("line")) l.classList.toggle("hl", l.dataset[t.dataset.side] === t.dataset.index);
      });
      svg.addEventListener("mouseout", (e) => { if (e.target.closest(".token")) svg.classList.remove("focus"); });
      fig.append(svg);
      box.append(fig);
    });
    $("links-note").textContent = `Shown: ${LINKS[state.links]}; layer ${layerNumbers()[layer]}, ${headName(head)}; ${total} links.`;
  }

  // Markup for many SVG elements at once: one parse is far cheaper than an element a call.
  const escape = (t) => String(t).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);

  function drawBeam() {
    const beam = sentence().beam, vocab = beam.vocab;
    $("chosen").replaceChildren(
      "chosen: ", el("span", { id: "chosen-text" }, beam.chosen.text),
      " score ", el("span", { id: "chosen-score" }, beam.chosen.score.toFixed(4)),
      " normalized ", el("span", { id: "chosen-normalized" }, beam.chosen.normalized.toFixed(4)),
      el("span", { class: "options" }, ` (beam ${beam.options.beam_size}, alpha ${beam.options.alpha}, ${beam.options.penalty})`),
    );
    const svg = $("beam-tree");
    const rows = beamRows();
    const chosen = beam.chosen.tokens;
    const onPath = (c) => c.ids.length <= chosen.length && c.ids.every((t, k) => t === chosen[k]) &&
      (c.status === "k" || c.ids.length === chosen.length);
    const COL = 180, NODE_W = 136, ROW = 26, NODE_H = 20, TOP = 8, LEFT = 4;
    const height = TOP * 2 + ROW * Math.max(1, ...rows.map((r) => r.length));
    svg.setAttribute("width", LEFT + COL * (rows.length + 1));
    svg.setAttribute("height", height);
    const edges = [], nodes = [];
    const node = (col, k, text, cls, title, data = "") => {
      const x = LEFT + col * COL, y = TOP + k * ROW;
      nodes.push(`<g class="node ${cls}"${data}><title>${escape(title)}</title>` +
        `<rect x="${x}" y="${y}" width="${NODE_W}" height="${NODE_H}" rx="4"/>` +
        `<text x="${x + 8}" y="${y + 14}">${escape(text)}</text></g>`);
      return { x, y };
    };
    const short = (t) => (t.length > 9 ? `${t.slice(0, 8)}…` : t);
    const prefix = (ids) => (ids.length > 12 ? "… " : "") + ids.slice(-12).map((i) => vocab[i]).join(" ");
    let parents = [node(0, 0, "<s>", "root kept chosen", "the decoder's start")];
    rows.forEach((row, t) => {
      const kept = [];
      row.forEach((c, k) => {
        const status = { k: "kept", f: "finished", p: "pruned" }[c.status];
        const token = short(vocab[c.ids[c.ids.length - 1]] ?? "?");
        const normalized = c.status === "f" ? ` → ${c.normalized.toFixed(2)}` : "";
        const text = `${token} ${c.score.toFixed(2)}${normalized}`;
        const path = onPath(c) ? " chosen" : "";
        const title = `${prefix(c.ids)}: log-probability ${c.score.toFixed(4)}${c.status === "f" ? `, normalized ${c.normalized.toFixed(4)}` : ""} (${status})`;
        const data = ` data-ids="${JSON.stringify(c.ids)}" data-step="${t + 1}"`;
        const n = node(t + 1, k, text, `${status}${path}`, title, data);
        const p = parents[t === 0 ? 0 : c.parent];
        edges.push(`<line class="edge ${status}${path}" x1="${p.x + NODE_W}" y1="${p.y + NODE_H / 2}" x2="${n.x}" y2="${n.y + NODE_H / 2}"/>`);
        if (c.status === "k") kept.push(n);
      });
      parents = kept;
    });
    svg.innerHTML = `<g class="edges">${edges.join("")}</g><g class="nodes">${nodes.join("")}</g>`;
  }

  // ---- controls ----
  function options(select, items, value) {
    select.replaceChildren(...items.map(([v, t]) => el("option", { value: v }, t)));
    select.value = value;
  }
  function clamp(previous) {
    // Validations may hold different sentences (a resume may change how many): keep the same
    // source where the new validation has it, else the nearest index.
    if (previous !== undefined && previous.v !== state.v) {
      const source = sentence(previous.v, previous.s).source;
      const same = sentences().findIndex((x) => x.source === source);
      state.s = same >= 0 ? same : Math.min(state.s, sentences().length - 1);
    }
    state.s = Math.max(0, Math.min(state.s, sentences().length - 1));
    state.r = Math.min(state.r, sentence().readings.length - 1);
    const kinds = Object.keys(KINDS).filter((k) => encodedOf(state.v, state.s, state.r, k).shape[0] > 0);
    if (!kinds.includes(state.kind)) state.kind = kinds[kinds.length - 1];
    const [layers, h] = shape(state.kind);
    state.layer = Math.max(0, Math.min(state.layer, layers - 1));
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
    options($("sentence"), sentences().map((x, i) => [i, `${i + 1}: ${x.source}`]), state.s);
    options($("reading"), sentence().readings.map((x, i) => [i, x.name]), state.r);
    options($("kind"), kinds.map((k) => [k, KINDS[k]]), state.kind);
    const [layers, h] = shape(state.kind);
    const numbers = layerNumbers();
    options($("layer"), [...Array(layers).keys()].map((l) => [l, numbers[l]]), state.layer);
    options($("head"), [...[...Array(h).keys()].map((x) => [x, x + 1]), ...(h > 1 ? [[MEAN, "mean"]] : [])], state.head);
    $("links").value = state.links;
    $("source").textContent = sentence().source;
  }
  // What each control redraws: the alignment and beam do not depend on the kind or reading,
  // the grid not on the layer or head, and the large map's labels only on the tokens.
  const ALL = ["grid", "labels", "map", "alignment", "beam"];
  const REDRAW = {
    v: ALL, s: ALL, r: ["grid", "labels", "map"], kind: ["grid", "labels", "map"],
    layer: ["map", "alignment"], head: ["map", "alignment"], links: ["alignment"],
  };
  function render(parts = ALL) {
    const kinds = clamp(render.previous);
    render.previous = { ...state };
    drawControls(kinds);
    if (parts.includes("grid")) drawGrid();
    else markSelected();
    if (parts.includes("map")) drawLarge(parts.includes("labels"));
    if (parts.includes("alignment")) drawAlignments();
    if (parts.includes("beam")) drawBeam();
  }
  function set(changes) {
    const parts = new Set(Object.keys(changes).flatMap((k) => REDRAW[k] ?? ALL));
    Object.assign(state, changes);
    render([...parts]);
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
  $("links").addEventListener("change", (e) => set({ links: e.target.value }));

  drawLegend();
  render();
  // For tests and the curious: the data as the page reads it.
  // readyAt: milliseconds from the start of navigation to the first drawing done.
  window.explorer = { data, state, set, matrix, finished, MEAN, ready: true, readyAt: performance.now() };
})();
