// pointcast viewer: the status page, the map of the points and a meteogram per point.
// Reads the published JSON tree with relative URLs only (docs/viewer.md), so it works the same
// from `pointcast serve` and from a static host serving a run's json/ folder.
"use strict";
(function () {
  const ORDER = ["eu-short", "eu-medium", "eu-wind", "global", "japan"];
  const POWER = "power"; // the sites' power files: power/index.json, power/<freq>/<site>.json
  const MAP_VALUES = 300; // points whose current value colours the map, at most (one file each)
  const state = { key: sessionStorage.getItem("pointcast-key") || "", cache: new Map(), charts: [], run: null };
  const main = document.getElementById("main");
  const utc = document.getElementById("utc");

  class HttpError extends Error {
    constructor(status, url) { super(`${url}: HTTP ${status}`); this.status = status; }
  }

  // -- data -----------------------------------------------------------------------------------

  function getJSON(path) {
    if (!state.cache.has(path)) {
      const headers = state.key ? { "X-API-Key": state.key } : {};
      const p = fetch(path, { headers, cache: "no-cache" }).then((r) => {
        if (!r.ok) throw new HttpError(r.status, path);
        return r.json();
      });
      p.catch(() => state.cache.delete(path));
      state.cache.set(path, p);
    }
    return state.cache.get(path);
  }

  async function optional(path) {
    try { return await getJSON(path); } catch (e) { if (e.status === 404) return null; throw e; }
  }

  async function loadRun() {
    const [manifest, validation, runs] = await Promise.all(
      [getJSON("manifest.json"), optional("validation.json"), optional("runs.json")]);
    const products = Object.keys(manifest.products || {}).sort(
      (a, b) => (ORDER.indexOf(a) + 1 || 99) - (ORDER.indexOf(b) + 1 || 99) || a.localeCompare(b));
    const indexes = {};
    await Promise.all(products.map(async (p) => { indexes[p] = await optional(`${p}/index.json`); }));
    // the sites' power (docs/viewer.md, "Power"): on the map and a meteogram per site
    if (manifest.power) indexes[POWER] = await optional(`${POWER}/index.json`);
    return { manifest, validation, runs: (runs && runs.runs) || [], products: products.filter((p) => indexes[p]), indexes };
  }

  const kind = (product, index) =>
    product === "eu-wind" || (index && index.ladder) ? "wind" : product === "global" || product === "japan" ? "wx" : "eu";

  function pointFile(product, index, point, variant) {
    const freq = variant || (index.freqs || ["1H"])[0];
    switch (kind(product, index)) {
      case "wx": return `${product}/${point.id}.json`;
      default: return `${product}/${freq}/${point.id}.json`;
    }
  }
  const hubHeights = (point) => (point.hub_heights && point.hub_heights.length ? point.hub_heights : [100]);
  // A windpack ladder object (<freq>/<id>.json, docs/api.md): its column of an element at height m.
  const ladderColumn = (f, name, m) => f[name][f.heights.indexOf(Number(m))];

  // -- small helpers --------------------------------------------------------------------------

  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v == null || v === false) continue;
      if (k === "class") el.className = v;
      else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? "" : v);
    }
    for (const kid of kids.flat(Infinity)) if (kid != null) el.append(kid instanceof Node ? kid : String(kid));
    return el;
  }

  const fmt = (v, digits) => (v == null ? "–" : typeof v === "number" ? (digits == null ? String(v) : v.toFixed(digits)) : String(v));

  function table(head, rows, attrs) {
    return h("table", attrs, h("tr", {}, head.map((x) => h("th", {}, x))),
      rows.map((r) => h("tr", {}, r.map((c) => (c instanceof Node ? h("td", {}, c)
        : h("td", { class: typeof c === "number" ? "num" : null }, fmt(c)))))));
  }

  const utcText = (iso) => (iso ? iso.replace("T", " ").replace(/:00(\+00:00|Z)$/, " UTC").replace(/\+00:00$/, " UTC") : "–");
  const secs = (iso) => Date.parse(iso) / 1000;
  const zone = (tz) => (utc.checked ? "UTC" : tz || "UTC");

  function timeText(ts, tz, withZone) {
    return new Intl.DateTimeFormat("en-GB", {
      timeZone: tz, weekday: "short", day: "2-digit", month: "short", hour: "2-digit", minute: "2-digit",
      hour12: false, timeZoneName: withZone ? "short" : undefined,
    }).format(new Date(ts * 1000));
  }

  // weather symbols: the text labels of the European products, the wx codes of global / japan
  const WEATHER = {
    "Clear sky": "☀", "Mainly clear": "☀", "Partly cloudy": "◐", Overcast: "☁", Fog: "≡", Drizzle: "☂",
    "Freezing drizzle": "☂", Rain: "☂", "Heavy rain": "☔", "Freezing rain": "☔", Sleet: "☂", Snow: "❄",
    "Heavy snow": "❄", "Rain showers": "☂", "Snow showers": "❄", Thunderstorm: "⚡",
  };
  const WX = { 1: "☀", 2: "☁", 3: "☂", 4: "❄", 5: "☾", 6: "◐", 8: "☔", 9: "❄" };
  const wxSymbol = (v) => (typeof v === "number" ? WX[Math.floor(v / 100)] || "?" : WEATHER[v] || "?");

  // -- the status page ------------------------------------------------------------------------

  function renderStatus(run) {
    const m = run.manifest;
    const basetimes = [...new Set(Object.values(m.products || {}).map((p) => p.basetime).filter(Boolean))].sort();
    const nexts = run.products.map((p) => run.indexes[p].next_update).filter(Boolean).sort();
    const overdue = nexts.length && Date.parse(nexts[0]) < Date.now();
    const verification = h("section", { id: "verification", hidden: true });
    const map = h("section", { id: "map" });
    main.replaceChildren(...[
      h("h2", {}, "Run"),
      table(["run", "basetime", "published", "next update", "source data"], [[
        h("span", { id: "run-id" }, m.run_id), h("span", { id: "run-basetime" }, basetimes.map(utcText).join(", ")),
        utcText(m.published_at), utcText(nexts[0]), m.synthetic ? "synthetic (sample source)" : "real model runs"]]),
      m.synthetic ? h("div", { class: "warn" }, m.notice) : null,
      overdue ? h("div", { class: "warn", id: "overdue" }, `The next update was due at ${utcText(nexts[0])}: `
        + "the cycles since have not published (see the last cycles below and the flow's log).") : null,
      h("div", { class: "grid" },
        h("section", {}, h("h2", {}, "Models"), modelsTable(m, run)),
        h("section", {}, h("h2", {}, "Validation"), validationBlock(run.validation))),
      h("h2", {}, "Products"), productsTable(run),
      degradedBlock(run),
      ensemblesBlock(run),
      h("h2", {}, "Blend seams (which model serves which lead times)"), seamsBlock(run),
      h("h2", {}, "Map of the points"), map,
      h("h2", {}, "Last cycles"), historyTable(run.runs),
      verification].filter((x) => x != null));
    document.getElementById("run-line").textContent = `run ${m.run_id}`;
    return Promise.all([renderMap(map, run), renderVerification(verification, run)]);
  }

  function modelsTable(m, run) {
    const models = [...new Set([...Object.keys(m.models || {}), ...Object.keys(m.dropped || {})])].sort();
    const notes = m.source_notes || {};
    return table(["model", "run", "source", "steps", "horizon h", "data", "used by", "dropped"], models.map((id) => {
      const info = (m.models || {})[id] || {};
      // the products it is blended into, and those whose probabilities and quantiles it gives
      const users = run.products.filter((p) => ["models", "ensembles"].some(
        (k) => ((m.products[p] || {})[k] || []).includes(id)));
      const dropped = (m.dropped || {})[id];
      const source = (notes[id] || []).length
        ? h("details", {}, h("summary", {}, info.source || "notes"), h("ul", {}, notes[id].map((n) => h("li", {}, n))))
        : info.source;
      return [id, utcText(info.init), source, info.steps,
        info.horizon_hours, info.synthetic == null ? "–" : info.synthetic ? "synthetic" : "real", users.join(", "),
        dropped ? h("span", { class: "bad" }, `dropped: ${typeof dropped === "string" ? dropped : JSON.stringify(dropped)}`) : "no"];
    }));
  }

  function validationBlock(v) {
    if (!v) return h("p", { class: "muted" }, "no validation report");
    const rows = Object.entries(v.products || {}).map(([p, s]) => [p, s.points, s.lead_times, s.variables, s.files]);
    return h("div", { id: "validation" },
      h("p", {}, v.ok ? h("span", { class: "ok" }, "passed") : h("span", { class: "bad" }, "FAILED"),
        ` (${(v.errors || []).length} errors)`),
      (v.errors || []).length ? h("ul", {}, v.errors.slice(0, 20).map((e) => h("li", {}, e))) : null,
      table(["product", "points", "lead times", "variables", "files"], rows));
  }

  const KNOWN = new Set(["basetime", "models", "horizon_hours", "freqs", "points", "seams_t2m", "ensembles",
    "probability_from", "quantiles_from", "stale_after_hours"]);

  function ageText(seconds) {
    const minutes = Math.floor(seconds / 60), hours = Math.floor(minutes / 60), days = Math.floor(hours / 24);
    if (days) return `${days} d ${hours % 24} h`;
    return hours ? `${hours} h ${minutes % 60} min` : `${minutes} min`;
  }

  function ageCell(info, basetime) {
    // now minus the basetime of the run serving the product; stale past the manifest's
    // stale_after_hours (its basetime model's run interval + publication delay + a schedule
    // period, as /catalog and /metrics judge the age; a run that does not record it is not judged)
    if (!basetime) return "–";
    const age = Math.max(0, Date.now() / 1000 - secs(basetime));
    const after = info.stale_after_hours;
    const stale = after > 0 && age > after * 3600;
    return h("span", { class: stale ? "age bad stale" : "age", "data-age-s": String(Math.round(age)),
      title: after ? `stale after ${after} h: ${(info.models || [])[0]}'s run interval + its publication delay`
        + " + a schedule period" : "" },
      ageText(age) + (stale ? ` — stale (over ${after} h)` : ""));
  }

  // "icon-eu-eps +0…+120 h, ens +120…+336 h": the sources of a statistic by lead time from the basetime
  function sourcesText(segments, basetime) {
    const lead = (iso) => Math.round((secs(iso) - secs(basetime)) / 3600);
    return (segments || []).map((s) => `${s.source} +${lead(s.from)}…+${lead(s.to)} h`).join(", ");
  }

  function ensemblesBlock(run) {
    // where each product's probabilities and quantiles come from, by lead time and variable
    const rows = run.products.flatMap((p) => {
      const info = run.manifest.products[p] || {};
      if (!(info.ensembles || []).length) return [];
      const quantiles = Object.entries(info.quantiles_from || {}).sort(([a], [b]) => a.localeCompare(b));
      return [[p, "probability of precipitation", sourcesText(info.probability_from, info.basetime)],
        ...quantiles.map(([name, segments]) => [p, name.replace(/_/g, " "), sourcesText(segments, info.basetime)])];
    });
    if (!rows.length) return null;
    return h("section", {}, h("h2", {}, "Ensembles (which ensemble gives each statistic, by lead time)"),
      table(["product", "statistic", "from"], rows, { id: "ensemble-sources" }));
  }

  function leadTimes(intervals) {
    return (intervals || []).map(([from, to]) => `+${from}…+${to} h`).join(", ");
  }

  function degradedBlock(run) {
    // the elements the run serves degraded (manifest "degraded"), in red, per product
    const degraded = run.manifest.degraded || {};
    const rows = Object.keys(degraded).sort().flatMap((p) => Object.keys(degraded[p] || {}).sort().map((element) => {
      const d = degraded[p][element] || {};
      return [p, element, leadTimes(d.lead_times), d.reason || ""];
    }));
    if (!rows.length) return null;
    const body = table(["product", "element", "lead times", "reason"], rows, { id: "degraded", class: "degraded" });
    return h("section", {}, h("h2", { class: "bad" }, "Degraded elements"), body);
  }

  function productsTable(run) {
    const notes = {};
    const rows = run.products.map((p) => {
      const info = run.manifest.products[p] || {};
      const index = run.indexes[p];
      const other = Object.entries(info).filter(([k]) => !KNOWN.has(k))
        .map(([k, v]) => `${k}: ${typeof v === "object" ? JSON.stringify(v) : v}`).join("; ");
      const first = index.points[0];
      if (other) notes[p] = other;
      return [p, utcText(info.basetime || index.basetime), ageCell(info, info.basetime || index.basetime),
        index.points.length, (info.freqs || index.freqs || []).join(", "),
        (info.models || []).join(" → "), info.horizon_hours,
        first ? h("a", { href: `#/p/${p}/${encodeURIComponent(first.id)}` }, first.name || first.id) : "",
        notes[p] || ""];
    });
    const head = ["product", "basetime", "age", "points", "variants", "models", "horizon h", "meteogram", "notes"];
    const some = Object.keys(notes).length ? 9 : 8; // the notes column only when the manifest has any
    return table(head.slice(0, some), rows.map((r) => r.slice(0, some)), { id: "products" });
  }

  const MODEL_COLOURS = ["#2a6f97", "#e07a1f", "#6a4c93", "#2b9348", "#b5179e", "#6c757d"];
  const modelColour = (model, models) => MODEL_COLOURS[Math.max(0, models.indexOf(model)) % MODEL_COLOURS.length];

  function seamsBlock(run) {
    const all = [...new Set(run.products.flatMap((p) => (run.manifest.products[p].models || [])))];
    return table(["product", "seams", "lead times"], run.products.map((p) => {
      const seams = run.manifest.products[p].seams_t2m || [];
      if (!seams.length) return [p, "–", "–"];
      const t0 = secs(seams[0].from), t1 = secs(seams[seams.length - 1].to);
      const bar = h("div", { class: "seam" }, seams.map((s, i) => {
        const end = i + 1 < seams.length ? secs(seams[i + 1].from) : t1;
        return h("div", { style: `flex: ${Math.max(end - secs(s.from), 1)}; background: ${modelColour(s.model, all)}`,
          title: `${s.model}: ${utcText(s.from)} – ${utcText(s.to)}` }, s.model);
      }));
      const text = seams.map((s) => `${s.model} +${Math.round((secs(s.from) - t0) / 3600)}…`
        + `${Math.round((secs(s.to) - t0) / 3600)} h`).join(", ");
      return [p, bar, text];
    }));
  }

  function historyTable(runs) {
    if (!runs.length) return h("p", { class: "muted" }, "no run history in this tree");
    return table(["time", "run", "basetime", "status", "reason"], runs.map((r) => {
      const dropped = Object.entries(r.dropped || {}).map(([k, v]) => `${k} dropped: ${v}`);
      const errors = (r.errors || []).concat(r.error_count > (r.errors || []).length
        ? [`… ${r.error_count - r.errors.length} more`] : []);
      return [utcText(r.time), r.run_id, utcText(r.basetime),
        h("span", { class: r.status === "published" ? "ok" : "bad" }, r.status),
        [...errors, ...dropped].join("; ") || ""];
    }), { id: "history" });
  }

  // -- the map --------------------------------------------------------------------------------

  async function renderMap(section, run) {
    if (!run.products.length) return;
    const layers = run.indexes[POWER] ? [...run.products, POWER] : run.products;
    const select = h("select", { id: "map-product" }, layers.map((p) => h("option", { value: p }, p === POWER ? "power (sites)" : p)));
    select.value = state.mapProduct && layers.includes(state.mapProduct) ? state.mapProduct : run.products[0];
    const holder = h("div");
    section.replaceChildren(h("div", { class: "controls" }, h("label", {}, "product ", select),
      h("span", { class: "muted" }, "click a point for its meteogram")), holder);
    const draw = async () => { state.mapProduct = select.value; await drawMap(holder, run, select.value); };
    select.addEventListener("change", draw);
    await draw();
  }

  async function drawMap(holder, run, product) {
    const world = await getJSON("viewer/vendor/world-atlas/countries-110m.json");
    const index = run.indexes[product];
    const points = index.points;
    const W = 960, H = 500;
    const circles = { type: "FeatureCollection", features: points.map((p) => ({
      type: "Feature", geometry: d3.geoCircle().center([p.lon, p.lat]).radius(2.5)() })) };
    const projection = d3.geoNaturalEarth1().fitExtent([[20, 20], [W - 20, H - 20]], circles).clipExtent([[0, 0], [W, H]]);
    const path = d3.geoPath(projection);
    const ns = "http://www.w3.org/2000/svg";
    const el = (tag, attrs) => { const e = document.createElementNS(ns, tag); for (const k in attrs) e.setAttribute(k, attrs[k]); return e; };
    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, "data-points": points.length });
    svg.append(el("path", { class: "land", d: path(topojson.feature(world, world.objects.countries)) }));
    svg.append(el("path", { d: path(topojson.mesh(world, world.objects.countries, (a, b) => a !== b)),
      fill: "none", stroke: "#c9c2ad", "stroke-width": 0.5 }));
    if (product === POWER) return drawSites(holder, svg, el, projection, points);
    const wind = kind(product, index) === "wind";
    const values = await currentValues(product, index, points.slice(0, MAP_VALUES));
    const [lo, hi] = wind ? [0, 25] : [-20, 35];
    const colour = (v) => (v == null ? "#999" : `hsl(${Math.round(250 * (1 - Math.min(1, Math.max(0, (v - lo) / (hi - lo)))))}, 75%, 50%)`);
    points.forEach((p, i) => {
      const [x, y] = projection([p.lon, p.lat]);
      const c = el("circle", { cx: x.toFixed(1), cy: y.toFixed(1), r: 5, fill: colour(values[i]), "data-id": p.id });
      const title = el("title", {});
      title.textContent = `${p.name || p.id}: ${values[i] == null ? "–" : values[i]} ${wind ? "m/s" : "°C"}`;
      c.append(title);
      c.addEventListener("click", () => { location.hash = `#/p/${product}/${encodeURIComponent(p.id)}`; });
      svg.append(c);
    });
    const what = wind ? `wind speed at ${points.length && hubHeights(points[0]).length ? "the first hub height (or 100 m)" : "100 m"}, first time step`
      : "temperature at the first time step";
    const gradient = Array.from({ length: 6 }, (_, i) => colour(lo + ((hi - lo) * i) / 5)).join(", ");
    holder.replaceChildren(svg, h("div", { class: "legend" }, `${points.length} points of ${product}, coloured by ${what}: `,
      h("span", { style: `display:inline-block;width:160px;height:10px;background:linear-gradient(90deg, ${gradient})` }),
      ` ${lo} … ${hi} ${wind ? "m/s" : "°C"}`,
      points.length > MAP_VALUES ? ` (values for the first ${MAP_VALUES} points)` : ""));
  }

  // the sites on the map: wind farms and solar plants by colour, sized by capacity
  const SITE_COLOURS = { wind: "#1d3557", pv: "#e07a1f" };
  function drawSites(holder, svg, el, projection, sites) {
    const most = Math.max(...sites.map((s) => s.capacity_kw || 0), 1);
    sites.forEach((s) => {
      const [x, y] = projection([s.lon, s.lat]);
      const c = el("circle", { cx: x.toFixed(1), cy: y.toFixed(1), r: (4 + 6 * Math.sqrt((s.capacity_kw || 0) / most)).toFixed(1),
        fill: SITE_COLOURS[s.kind] || "#999", "fill-opacity": 0.8, stroke: "#fff", "data-id": s.id, "data-kind": s.kind });
      const title = el("title", {});
      title.textContent = `${s.name || s.id}: ${s.kind === "pv" ? "solar plant" : "wind farm"}, ${fmt(s.capacity_kw / 1000)} MW (${s.product})`;
      c.append(title);
      c.addEventListener("click", () => { location.hash = `#/p/${POWER}/${encodeURIComponent(s.id)}`; });
      svg.append(c);
    });
    const swatch = (k) => h("span", { class: "swatch", style: `display:inline-block;width:10px;height:10px;border-radius:5px;background: ${SITE_COLOURS[k]}` });
    holder.replaceChildren(svg, h("div", { class: "legend" }, `${sites.length} sites: `, swatch("wind"), " wind farms ",
      swatch("pv"), " solar plants, sized by capacity; click a site for its power"));
  }

  async function currentValues(product, index, points) {
    const out = new Array(points.length).fill(null);
    const k = kind(product, index);
    for (let i = 0; i < points.length; i += 8) {
      await Promise.all(points.slice(i, i + 8).map(async (p, j) => {
        const f = await optional(pointFile(product, index, p));
        if (!f) return;
        out[i + j] = k === "wx" ? f.srf[0].temp : k === "wind" ? ladderColumn(f, "windspd", hubHeights(p)[0])[0] : f.data[0].temp_2m;
      }));
    }
    return out;
  }

  // -- verification ---------------------------------------------------------------------------

  async function verificationOf(product) {
    return (await optional("verification/index.json")) ? optional(`verification/${product}.json`) : null;
  }

  // the mean of a bin score over bins, weighted by their pairs (null: no bin has it)
  function weighted(bins, get) {
    const use = bins.filter((b) => get(b) != null && b.n);
    const w = use.reduce((s, b) => s + b.n, 0);
    return w ? use.reduce((s, b) => s + get(b) * b.n, 0) / w : null;
  }

  function summary(bins) {
    const n = bins.reduce((s, b) => s + (b.n || 0), 0);
    const mean = (get) => weighted(bins, get);
    return { n, bias: mean((b) => b.bias), mae: mean((b) => b.mae), rmse: mean((b) => b.rmse),
      persistence: mean((b) => (b.persistence || {}).mae), corrected: mean((b) => (b.corrected || {}).mae) };
  }

  // n-weighted mean of a bin score over bins, by lead day: "d1 0.12 · d2 0.15"
  function byLeadDay(bins, get) {
    const days = new Map();
    for (const b of bins) {
      const d = Math.floor(b.lead_from_h / 24);
      if (!days.has(d)) days.set(d, []);
      days.get(d).push(b);
    }
    return [...days.entries()].sort((a, b) => a[0] - b[0]).map(([d, bs]) => {
      const m = weighted(bs, get);
      return m == null ? null : `d${d + 1} ${m.toFixed(3)}`;
    }).filter(Boolean).join(" · ");
  }

  async function renderVerification(section, run) {
    const index = await optional("verification/index.json");
    if (!index) return;
    const listed = Array.isArray(index.products) ? index.products.map((p) => (typeof p === "string" ? p : p.product))
      : index.products ? Object.keys(index.products) : run.products;
    const rows = [], probabilistic = [], reliability = [];
    let edges = [];
    const d = (x, digits = 2) => (x == null ? null : Number(x.toFixed(digits)));
    for (const p of listed.filter(Boolean)) {
      const v = await optional(`verification/${p}.json`);
      for (const [name, variable] of Object.entries((v && v.variables) || {})) {
        const bins = variable.bins || [];
        // the Brier score of a probability, the CRPS of quantiles (docs/verification.md)
        const key = bins.some((b) => b.brier != null) ? "brier" : bins.some((b) => b.crps != null) ? "crps" : null;
        if (!key) {
          const s = summary(bins);
          rows.push([p, name, variable.units || "", s.n, d(s.bias), d(s.mae), d(s.rmse), d(s.persistence), d(s.corrected)]);
          continue;
        }
        const get = (b) => b[key];
        const n = bins.reduce((t, b) => t + (b.n || 0), 0);
        probabilistic.push([p, name, key === "brier" ? "Brier" : "CRPS", key === "brier" ? "1" : variable.units || "",
          n, d(weighted(bins, get), 4), d(weighted(bins, (b) => (b.persistence || {})[key]), 4), byLeadDay(bins, get)]);
        if (Array.isArray(variable.reliability)) {
          edges = variable.reliability.map((r) => `${r.forecast_from}-${r.forecast_to} %`);
          reliability.push([p, name, ...variable.reliability.map((r) => (r.n ? `${r.observed_frequency.toFixed(2)} (${r.n})` : "–"))]);
        }
      }
    }
    const parts = [h("h2", {}, "Verification"),
      h("p", { class: "muted" }, `Forecast against observations, averaged over lead times (weighted by count)${index.generated ? `, generated ${utcText(index.generated)}` : ""}.`)];
    if (rows.length) parts.push(table(["product", "variable", "units", "n", "bias", "MAE", "RMSE", "MAE persistence", "MAE corrected"], rows));
    if (probabilistic.length) {
      parts.push(h("h3", {}, "Probabilities and quantiles"),
        h("p", { class: "muted" }, "Brier score of the probability of at least 0.1 mm in the hour; CRPS of the ensemble quantiles; lower is better. By lead day: d1 = 0-24 h."),
        table(["product", "variable", "score", "units", "n", "all lead times", "persistence", "by lead day"], probabilistic, { id: "verification-probabilistic" }));
    }
    if (reliability.length) {
      parts.push(h("h3", {}, "Reliability"),
        h("p", { class: "muted" }, "Observed frequency of the event by forecast probability (pairs)."),
        table(["product", "variable", ...edges], reliability, { id: "verification-reliability" }));
    }
    section.replaceChildren(...parts);
    section.hidden = false;
  }

  // -- the meteogram --------------------------------------------------------------------------

  function seamHook(seams) {
    return (u) => {
      const ctx = u.ctx, dpr = devicePixelRatio, { left, top, width, height } = u.bbox;
      ctx.save();
      seams.forEach((s, i) => {
        const x0 = Math.max(left, u.valToPos(secs(s.from), "x", true));
        const end = i + 1 < seams.length ? secs(seams[i + 1].from) : secs(s.to);
        const x1 = Math.min(left + width, u.valToPos(end, "x", true));
        if (x1 <= x0) return;
        ctx.fillStyle = i % 2 ? "rgba(42,111,151,0.08)" : "rgba(224,122,31,0.08)";
        ctx.fillRect(x0, top, x1 - x0, height);
        ctx.fillStyle = "#667";
        ctx.font = `${10 * dpr}px sans-serif`;
        ctx.fillText(s.model, x0 + 3 * dpr, top + height - 4 * dpr);
      });
      ctx.restore();
    };
  }

  function symbolsHook(times, symbols) {
    return (u) => {
      const ctx = u.ctx, dpr = devicePixelRatio;
      const step = Math.max(1, Math.ceil((22 * dpr * times.length) / u.bbox.width));
      ctx.save();
      ctx.font = `${14 * dpr}px "DejaVu Sans", sans-serif`;
      ctx.textAlign = "center";
      ctx.fillStyle = "#445";
      for (let i = 0; i < times.length; i += step) {
        if (symbols[i] == null) continue;
        ctx.fillText(wxSymbol(symbols[i]), u.valToPos(times[i], "x", true), u.bbox.top - 6 * dpr);
      }
      ctx.restore();
    };
  }

  function arrowsHook(times, dirs) {
    // arrows point where the wind blows to: the published direction is where it comes from
    return (u) => {
      const ctx = u.ctx, dpr = devicePixelRatio, len = 9 * dpr;
      const step = Math.max(1, Math.ceil((20 * dpr * times.length) / u.bbox.width));
      const y = u.bbox.top + u.bbox.height - 10 * dpr;
      ctx.save();
      ctx.strokeStyle = "#333";
      ctx.lineWidth = 1.2 * dpr;
      for (let i = 0; i < times.length; i += step) {
        if (dirs[i] == null) continue;
        ctx.save();
        ctx.translate(u.valToPos(times[i], "x", true), y);
        ctx.rotate(((dirs[i] + 180) * Math.PI) / 180);
        ctx.beginPath();
        ctx.moveTo(0, len / 2); ctx.lineTo(0, -len / 2);
        ctx.moveTo(-3 * dpr, -len / 2 + 4 * dpr); ctx.lineTo(0, -len / 2); ctx.lineTo(3 * dpr, -len / 2 + 4 * dpr);
        ctx.stroke();
        ctx.restore();
      }
      ctx.restore();
    };
  }

  // the time axis in 24-hour clock and day-month dates (uPlot's default is US style)
  const TIME_AXIS = { values: [
    [3600 * 24 * 28, "{MMM}", "\n{YYYY}", null, null, null, null, null, 1],
    [3600 * 24, "{D} {MMM}", "\n{YYYY}", null, null, null, null, null, 1],
    [3600, "{HH}:{mm}", "\n{D} {MMM}", null, "\n{D} {MMM}", null, null, null, 1],
    [60, "{HH}:{mm}", "\n{D} {MMM}", null, "\n{D} {MMM}", null, null, null, 1],
  ] };

  function chart(parent, name, title, tz, series, data, extra) {
    const box = h("div", { class: "chart", "data-chart": name }, h("h3", {}, title));
    parent.append(box);
    const opts = Object.assign({
      width: Math.max(320, box.clientWidth - 2), height: 200,
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1e3), tz),
      series: [{ label: "time", value: (u, v) => (v == null ? "–" : timeText(v, tz, false)) }, ...series],
      cursor: { sync: { key: "meteogram" } },
    }, extra);
    if (!opts.scales || !opts.scales.x || opts.scales.x.time !== false) {
      opts.axes = [Object.assign({}, TIME_AXIS, (opts.axes || [])[0]), ...(opts.axes || []).slice(1)];
    }
    const u = new uPlot(opts, data, box);
    box._uplot = u;
    state.charts.push(u);
    return u;
  }

  const line = (label, stroke, extra) => Object.assign({ label, stroke, width: 1.5, spanGaps: true }, extra);
  const bars = (label, fill, extra) => Object.assign({ label, fill, stroke: fill, paths: uPlot.paths.bars({ size: [0.8, 24] }), points: { show: false } }, extra);
  const col = (rows, key) => rows.map((r) => (r[key] == null ? null : r[key]));

  function errorBand(verif, names, times, temps, basetime) {
    // +-MAE of the lead time's bin around the temperature curve (verification/<product>.json)
    const variable = names.map((n) => verif && verif.variables && verif.variables[n]).find(Boolean);
    if (!variable || !(variable.bins || []).length) return null;
    const mae = times.map((t) => {
      const lead = (t - basetime) / 3600;
      const bin = variable.bins.find((b) => lead >= b.lead_from_h && lead < b.lead_to_h);
      return bin && bin.mae != null ? bin.mae : null;
    });
    return [temps.map((v, i) => (v == null || mae[i] == null ? null : v + mae[i])),
      temps.map((v, i) => (v == null || mae[i] == null ? null : v - mae[i]))];
  }

  // -- the ensemble quantiles (docs/viewer.md): bands from <product>/quantiles/<id>.json

  // the bands drawn: [lower, upper quantile, fill opacity]; the inner band darker
  const QUANTILE_BANDS = [[0.1, 0.9, 0.15], [0.25, 0.75, 0.3]];

  // a point's quantile file, for a product that has ensembles (manifest), else null
  async function quantilesOf(run, product, point) {
    const ensembles = (run.manifest.products[product] || {}).ensembles || [];
    return ensembles.length ? optional(`${product}/quantiles/${point.id}.json`) : null;
  }

  // a series published from `start` every `step` seconds, at `times` (s): null off its times
  function onTimes(start, step, values, times) {
    const t0 = secs(start);
    return times.map((t) => {
      const i = (t - t0) / step;
      return Number.isInteger(i) && i >= 0 && i < values.length && values[i] != null ? values[i] : null;
    });
  }

  // one quantile of a quantile file's rows at `times`: null where no ensemble covers (a gap)
  function quantileAt(q, rows, level, times) {
    const k = q.quantiles.indexOf(level);
    return onTimes(q.start, q.step_seconds, rows, times).map((r) => (r == null || r[k] == null ? null : r[k]));
  }

  // The P10-P90 and P25-P75 bands of `rows` (a quantile file's variable) added to a chart's
  // series, data and bands: each band between two edge series that leave gaps where the
  // quantiles are null, so hours no ensemble covers show no band (never a band at 0).
  function addQuantileBands(series, data, bands, q, rows, times, rgb) {
    const edges = bandEdges(q, rows, times);
    for (const [lo, hi, alpha] of QUANTILE_BANDS) {
      const edge = { width: 0.5, spanGaps: false, points: { show: false } };
      series.push(line(`P${lo * 100}`, `rgba(${rgb},0.45)`, edge), line(`P${hi * 100}`, `rgba(${rgb},0.45)`, edge));
      data.push(...edges.splice(0, 2));
      bands.push({ series: [data.length - 1, data.length - 2], fill: `rgba(${rgb},${alpha})` });
    }
  }

  // the bands' edge series in the order addQuantileBands adds them (P10, P90, P25, P75)
  const bandEdges = (q, rows, times) => QUANTILE_BANDS.flatMap(([lo, hi]) => [quantileAt(q, rows, lo, times), quantileAt(q, rows, hi, times)]);

  // what the bands are, beside a chart's title
  function bandsLegend(q, rgb, ensembles, what) {
    const swatch = (alpha) => h("span", { class: "swatch", style: `background: rgba(${rgb},${alpha})` });
    const [[lo, hi, outer], [lo2, hi2, inner]] = QUANTILE_BANDS;
    return h("span", { class: "bands-legend" }, " — ", swatch(outer), ` P${lo * 100}–P${hi * 100} `, swatch(inner),
      ` P${lo2 * 100}–P${hi2 * 100}: quantiles of the ensemble members${what ? ` ${what}` : ""} (${ensembles.join(", ")}; `
      + "no band where no ensemble covers)");
  }

  function tempChart(parent, tz, times, curves, symbols, seams, band, ens) {
    const series = curves.map(([label, stroke]) => line(label, stroke));
    const data = [times, ...curves.map((c) => c[2])];
    const extra = { padding: [24, null, null, null], hooks: { drawClear: [seamHook(seams)], draw: [symbolsHook(times, symbols)] },
      axes: [{}, { label: "°C" }], bands: [] };
    if (band) {
      const edge = { width: 1, dash: [4, 3], points: { show: false } };
      series.push(line("temp + MAE", "rgba(200,40,40,0.35)", edge), line("temp − MAE", "rgba(200,40,40,0.35)", edge));
      data.push(band[0], band[1]);
      extra.bands.push({ series: [data.length - 2, data.length - 1], fill: "rgba(200,40,40,0.10)" });
    }
    const rgb = "192,57,43";
    if (ens.q) addQuantileBands(series, data, extra.bands, ens.q, ens.q.temperature, times, rgb);
    const title = band ? "Temperature (dashed: ±MAE of verification by lead time)" : "Temperature";
    return chart(parent, "temperature", [title, ens.q ? bandsLegend(ens.q, rgb, ens.ensembles) : null], tz, series, data, extra);
  }

  function precipChart(parent, tz, times, amount, seams, unit) {
    return chart(parent, "precipitation", "Precipitation", tz, [bars(`precipitation ${unit}`, "rgba(29,78,216,0.6)")], [times, amount], {
      scales: { y: { range: (u, lo, hi) => [0, Math.max(1, hi * 1.1)] } }, axes: [{}, { label: unit }],
      hooks: { drawClear: [seamHook(seams)] } });
  }

  function probabilityChart(parent, tz, times, pop, label, title, seams) {
    return chart(parent, "probability", title, tz, [bars(label, "rgba(14,116,144,0.6)")], [times, pop], {
      scales: { y: { range: [0, 100] } }, axes: [{}, { label: "%" }], hooks: { drawClear: [seamHook(seams)] } });
  }

  // wind speed curves; with `ens.rows` (a quantile file's rows of the first curve) its bands
  function windChart(parent, name, title, tz, times, curves, dirs, seams, ens) {
    const series = curves.map(([label, stroke]) => line(label, stroke));
    const data = [times, ...curves.map((c) => c[2])];
    const bands = [], rgb = "29,53,87";
    if (ens && ens.rows) addQuantileBands(series, data, bands, ens.q, ens.rows, times, rgb);
    return chart(parent, name, [title, ens && ens.rows ? bandsLegend(ens.q, rgb, ens.ensembles, ens.what) : null], tz, series, data, {
      scales: { y: { range: (u, lo, hi) => [0, Math.max(5, hi * 1.1)] } }, axes: [{}, { label: "m/s" }], bands,
      hooks: { drawClear: [seamHook(seams)], draw: [arrowsHook(times, dirs)] } });
  }

  function simpleChart(parent, name, title, tz, label, stroke, times, values, unit, seams, extra) {
    return chart(parent, name, title, tz, [line(label, stroke, extra)], [times, values],
      { axes: [{}, { label: unit }], hooks: { drawClear: [seamHook(seams)] } });
  }

  function dataTable(tz, times, columns, rows) {
    return h("table", { id: "data" }, h("tr", {}, h("th", {}, `time (${tz})`), columns.map(([label]) => h("th", {}, label))),
      times.slice(0, rows).map((t, i) => h("tr", {}, h("td", {}, timeText(t, tz, false)),
        columns.map(([, key, values]) => h("td", { class: "num", "data-key": key }, fmt(values[i]))))));
  }

  async function renderPoint(run, product, id, variant) {
    const index = run.indexes[product];
    const point = index && index.points.find((p) => p.id === id);
    if (!point) throw new Error(`no point ${id} in product ${product}`);
    const info = run.manifest.products[product] || {};
    const seams = info.seams_t2m || [];
    const tz = zone(point.time_zone || index.time_zone);
    const k = product === POWER ? POWER : kind(product, index);
    const freqs = k === POWER ? point.freqs || ["1H"] : k === "wx" ? [] : index.freqs || info.freqs || ["1H"];
    const freq = freqs.includes(variant) ? variant : freqs[0];
    const head = h("div", {},
      h("p", {}, h("a", { href: "#/" }, "← status and map")),
      h("h2", { id: "point-title" }, `${point.name || point.id} — ${product}`),
      h("p", { class: "muted" }, `${point.lat}, ${point.lon}`, point.elevation != null ? `, ${point.elevation} m` : "",
        ` · times in ${tz}`, ` · basetime ${utcText(info.basetime || index.basetime)} · run ${run.manifest.run_id}`));
    if (freqs.length > 1) {
      const sel = h("select", { id: "freq" }, freqs.map((f) => h("option", { value: f }, f)));
      sel.value = freq;
      sel.addEventListener("change", () => { location.hash = `#/p/${product}/${encodeURIComponent(id)}/${sel.value}`; });
      head.append(h("div", { class: "controls" }, h("label", {}, "time step ", sel)));
    }
    const body = h("div");
    main.replaceChildren(head, body);
    const [verif, q] = await Promise.all([verificationOf(product), quantilesOf(run, product, point)]);
    const ens = { q, ensembles: info.ensembles || [] };
    if (k === POWER) await renderPower(body, point, freq, tz);
    else if (k === "eu") await renderEu(body, product, point, freq, tz, seams, verif, ens);
    else if (k === "wind") await renderWind(body, product, point, freq, tz, seams, ens);
    else await renderWx(body, product, point, tz, seams, verif, ens);
    document.getElementById("run-line").textContent = `run ${run.manifest.run_id} · ${point.name || point.id}`;
  }

  async function renderEu(body, product, point, freq, tz, seams, verif, ens) {
    const f = await getJSON(`${product}/${freq}/${point.id}.json`);
    const rows = f.data;
    const t = rows.map((r) => secs(r.datetime));
    const temp = col(rows, "temp_2m");
    const band = errorBand(verif, ["temp_2m", "temp"], t, temp, secs(f.basetime));
    tempChart(body, tz, t, [["temperature 2 m °C", "#c0392b", temp], ["dewpoint °C", "#2b9348", col(rows, "dewpoint_temperature")]],
      col(rows, "weather_type"), seams, band, ens);
    precipChart(body, tz, t, col(rows, "precipitation"), seams, "mm/h");
    probabilityChart(body, tz, t, col(rows, "precipitation_proba"), "probability %",
      "Probability of precipitation (at least 0.1 mm in the hour)", seams);
    windChart(body, "wind", "Wind at 10 m (arrows: where it blows to) and gust", tz, t,
      [["speed 10 m m/s", "#1d3557", col(rows, "windspd_10m")], ["gust m/s", "#e07a1f", col(rows, "windgust")]],
      col(rows, "windir_10m"), seams, { ...ens, rows: ens.q && ens.q.wind_speed, what: "at 10 m" });
    simpleChart(body, "cloud", "Cloud cover", tz, "total cloud cover %", "#6c757d", t, col(rows, "total_cloud_cover"), "%",
      seams, { fill: "rgba(108,117,125,0.25)" });
    simpleChart(body, "pressure", "Pressure at mean sea level", tz, "pressure hPa", "#6a4c93", t, col(rows, "sea_surface_pressure"), "hPa", seams);
    body.append(h("h3", {}, "First time steps"), dataTable(tz, t, [
      ["weather", "weather_type", col(rows, "weather_type")], ["temp_2m °C", "temp_2m", temp],
      ["dewpoint °C", "dewpoint_temperature", col(rows, "dewpoint_temperature")],
      ["precip. mm/h", "precipitation", col(rows, "precipitation")], ["prob. %", "precipitation_proba", col(rows, "precipitation_proba")],
      ["wind m/s", "windspd_10m", col(rows, "windspd_10m")], ["dir °", "windir_10m", col(rows, "windir_10m")],
      ["gust m/s", "windgust", col(rows, "windgust")], ["cloud %", "total_cloud_cover", col(rows, "total_cloud_cover")],
      ["MSLP hPa", "sea_surface_pressure", col(rows, "sea_surface_pressure")]], 12));
  }

  const PALETTE = ["#1d3557", "#c0392b", "#2b9348", "#e07a1f", "#6a4c93", "#0e7490"];

  async function renderWind(body, product, point, freq, tz, seams, ens) {
    const f = await getJSON(`${product}/${freq}/${point.id}.json`);
    const heights = f.heights;
    const hubs = hubHeights(point).filter((m) => heights.includes(Number(m)));
    const t = f.datetime.map(secs);
    // the bands around one hub height's curve (the first; a choice when there are more): the
    // quantile file's wind speed at that height
    const at = (m) => (ens.q && ens.q.wind_speed_at ? ens.q.wind_speed_at[`${Number(m)}m`] : null);
    const hubChart = windChart(body, "hub-wind", `Wind speed at the hub height${hubs.length > 1 ? "s" : ""} (arrows: direction at ${hubs[0]} m)`, tz, t,
      hubs.map((m, i) => [`${m} m m/s`, PALETTE[i % PALETTE.length], ladderColumn(f, "windspd", m)]),
      ladderColumn(f, "windir", hubs[0]), seams, { ...ens, rows: at(hubs[0]), what: hubs.length > 1 ? "at the chosen hub height" : `at ${hubs[0]} m` });
    if (at(hubs[0]) && hubs.length > 1) {
      const sel = h("select", { id: "band-height" }, hubs.filter((m) => at(m)).map((m) => h("option", { value: m }, `${m} m`)));
      sel.addEventListener("change", () => hubChart.setData([...hubChart.data.slice(0, 1 + hubs.length), ...bandEdges(ens.q, at(sel.value), t)]));
      hubChart.root.before(h("div", { class: "controls" }, h("label", {}, "quantile bands at ", sel)));
    }
    const slider = h("input", { type: "range", min: 0, max: t.length - 1, value: 0, id: "profile-time" });
    const label = h("span", {});
    body.append(h("div", { class: "controls" }, h("label", {}, "profile at ", slider), label));
    const profile = (i) => [heights, f.windspd.map((column) => column[i])];
    const u = chart(body, "profile", "Vertical profile of the wind speed", tz, [], profile(0), {
        height: 320, series: [{ label: "height m" }, line("speed m/s", "#1d3557", { points: { show: true, size: 6 } })],
        scales: { x: { time: false, ori: 1, dir: 1, range: (u, lo, hi) => [0, hi] }, y: { ori: 0, dir: 1, range: (u, lo, hi) => [0, Math.max(5, hi * 1.1)] } },
        axes: [{ side: 3, label: "height m" }, { side: 2, label: "m/s" }], cursor: {} });
    const show = () => {
      const i = Number(slider.value);
      label.textContent = timeText(t[i], tz, true);
      u.setData(profile(i));
    };
    slider.addEventListener("input", show);
    show();
    body.append(h("h3", {}, "First time steps"), dataTable(tz, t, hubs.flatMap((m) => [
      [`${m} m speed m/s`, `windspd_${m}m`, ladderColumn(f, "windspd", m)],
      [`${m} m dir °`, `windir_${m}m`, ladderColumn(f, "windir", m)]]), 12));
  }

  // A site's power (power/<freq>/<site>.json): the deterministic power, the P10-P90 and P25-P75
  // bands of the members' power where an ensemble covers, and the site's capacity.
  async function renderPower(body, site, freq, tz) {
    const f = await getJSON(`${POWER}/${freq}/${site.id}.json`);
    const rows = f.data;
    const t = rows.map((r) => secs(r.datetime));
    const rgb = "43,147,72";
    const series = [line("power kW", `rgb(${rgb})`, { width: 2 }),
      line("capacity kW", "#555", { dash: [6, 4], width: 1, points: { show: false } })];
    const data = [t, col(rows, "power"), t.map(() => f.capacity_kw)];
    const extra = { axes: [{}, { label: "kW", size: 70 }], bands: [],
      scales: { y: { range: (u, lo, hi) => [0, Math.max(f.capacity_kw * 1.08, hi)] } } };
    const covered = rows.some((r) => r.p50 != null);
    if (covered) {
      for (const [lo, hi, alpha] of QUANTILE_BANDS) {
        const edge = { width: 0.5, spanGaps: false, points: { show: false } };
        series.push(line(`P${lo * 100}`, `rgba(${rgb},0.45)`, edge), line(`P${hi * 100}`, `rgba(${rgb},0.45)`, edge));
        data.push(col(rows, `p${Math.round(lo * 100)}`), col(rows, `p${Math.round(hi * 100)}`));
        extra.bands.push({ series: [data.length - 1, data.length - 2], fill: `rgba(${rgb},${alpha})` });
      }
    }
    const what = site.kind === "pv" ? "solar plant" : `wind farm, hub ${site.hub_height} m, ${site.turbine}`;
    chart(body, POWER, [`Power (${what}; dashed: capacity ${fmt(f.capacity_kw / 1000)} MW)`,
      covered ? bandsLegend(null, rgb, f.quantiles_from, "through the power curve") : h("span", { class: "muted" },
        " — no quantiles: " + (site.kind === "pv" ? "no ensemble's members carry radiation" : "no ensemble covers"))],
    tz, series, data, extra);
    simpleChart(body, "capacity-factor", "Capacity factor", tz, "capacity factor", "#0e7490", t, col(rows, "capacity_factor"), "1", []);
    body.append(h("h3", {}, "First time steps"), dataTable(tz, t, [
      ["power kW", "power", col(rows, "power")], ["capacity factor", "capacity_factor", col(rows, "capacity_factor")],
      ...["p10", "p25", "p50", "p75", "p90"].map((k) => [`${k.toUpperCase()} kW`, k, col(rows, k)])], 12));
  }

  async function renderWx(body, product, point, tz, seams, verif, ens) {
    const f = await getJSON(`${product}/${point.id}.json`);
    // global's hourly file holds the hourly probability of precipitation; japan publishes the day's alone
    const hourly = product === "global" ? await optional(`${product}/hourly/${point.id}.json`) : null;
    const srf = f.srf || [], mrf = f.mrf || [];
    const t = srf.map((r) => secs(r.date));
    const temp = col(srf, "temp");
    const curves = [["temperature °C", "#c0392b", temp]];
    if (srf.length && "feeltmp" in srf[0]) curves.push(["feels like °C", "#e07a1f", col(srf, "feeltmp")]);
    const band = errorBand(verif, ["temp", "temp_2m"], t, temp, t[0]);
    tempChart(body, tz, t, curves, col(srf, "wx"), seams, band, ens);
    precipChart(body, tz, t, col(srf, "prec"), seams, "mm/h");
    if (hourly && hourly.pop) {
      probabilityChart(body, tz, t, onTimes(hourly.start, hourly.step_seconds, hourly.pop, t), "probability %",
        "Probability of precipitation (at least 0.1 mm in the hour)", seams);
    } else if (mrf.some((d) => d.pop != null)) {
      const day = (ts) => mrf.find((d) => ts >= secs(d.date) && ts < secs(d.date) + 86400);
      probabilityChart(body, tz, t, t.map((ts) => { const d = day(ts); return d && d.pop >= 0 ? d.pop : null; }),
        "probability of the day %", "Probability of precipitation of the day (the daily pop: each hour shows its day's)", seams);
    }
    windChart(body, "wind", "Wind (arrows: where it blows to)", tz, t, [["speed m/s", "#1d3557", col(srf, "wndspd")]],
      col(srf, "wnddir"), seams, { ...ens, rows: ens.q && ens.q.wind_speed, what: "at 10 m" });
    simpleChart(body, "pressure", "Pressure", tz, "pressure hPa", "#6a4c93", t, col(srf, "arpress"), "hPa", seams);
    body.append(h("h3", {}, "Days"), h("div", { class: "days", id: "days" }, mrf.map((d) => h("div", { class: "day", title: `wx ${d.wx}` },
      h("div", {}, new Intl.DateTimeFormat("en-GB", { timeZone: tz, weekday: "short", day: "2-digit", month: "short" }).format(new Date(d.date))),
      h("div", { class: "icon" }, wxSymbol(d.wx)),
      h("div", {}, h("span", { class: "max" }, fmt(d.maxtemp)), " / ", h("span", { class: "min" }, fmt(d.mintemp)), " °C"),
      d.prec != null ? h("div", {}, `${fmt(d.prec)} mm`) : null, h("div", { title: "probability of precipitation" }, `${fmt(d.pop)} %`)))));
    const columns = [["wx", "wx", col(srf, "wx")], ["temp °C", "temp", temp]];
    if (curves.length > 1) columns.push(["feels like °C", "feeltmp", col(srf, "feeltmp")]);
    columns.push(["precip. mm/h", "prec", col(srf, "prec")], ["wind m/s", "wndspd", col(srf, "wndspd")],
      ["dir °", "wnddir", col(srf, "wnddir")], ["hPa", "arpress", col(srf, "arpress")], ["RH %", "rhum", col(srf, "rhum")]);
    body.append(h("h3", {}, "First hours"), dataTable(tz, t, columns, 12));
  }

  // -- routing --------------------------------------------------------------------------------

  function keyForm() {
    const input = h("input", { type: "password", placeholder: "X-API-Key", id: "api-key" });
    main.replaceChildren(h("form", { class: "keyform", onsubmit: (e) => {
      e.preventDefault();
      state.key = input.value;
      sessionStorage.setItem("pointcast-key", state.key);
      state.cache.clear();
      state.run = null;
      go();
    } }, h("p", {}, "This server needs an API key for the forecast files."), input, " ", h("button", {}, "use key")));
  }

  async function go() {
    state.charts.forEach((u) => u.destroy());
    state.charts = [];
    delete document.body.dataset.ready;
    try {
      if (!state.run) state.run = loadRun();
      const run = await state.run;
      const m = location.hash.match(/^#\/p\/([^/]+)\/([^/]+)(?:\/([^/]+))?$/);
      if (m) await renderPoint(run, decodeURIComponent(m[1]), decodeURIComponent(m[2]), m[3] && decodeURIComponent(m[3]));
      else await renderStatus(run);
    } catch (e) {
      state.run = null;
      if (e.status === 401) keyForm();
      else if (e.status === 404 && /manifest\.json/.test(e.message)) main.replaceChildren(h("p", { class: "warn" }, "No forecast run published yet."));
      else { console.error(e); main.replaceChildren(h("p", { class: "error" }, String(e.message || e))); }
    }
    document.body.dataset.ready = location.hash || "#/";
  }

  window.addEventListener("hashchange", go);
  utc.addEventListener("change", go);
  go();
})();
