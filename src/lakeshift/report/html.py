"""``report.html``: one self-contained page (inline CSS, JS, data-URI images) with tables, plots and an
example browser.

The browser shows a stratified sample of scored outputs (:class:`ExampleSampler`: round robin over
``(size, verdict)`` within every predictions file, so rare verdicts are shown too). Filters: run (model),
split, size, verdict; they can be preset from the URL hash, e.g. ``report.html#split=ood-dist&verdict=
fell_in_hole``, and the page writes the current state into the DOM (``#visible-count``,
``body[data-visible]``, ``body[data-ready]``, ``#js-errors``) so headless tests can read it back.
Each example shows the map (the PNG when ``<split>/images/<id>.png`` exists, and always a drawn grid with
the optimal path and the model's path), the output with the failing step highlighted and the optimal path.
"""

from __future__ import annotations

import base64
import io
import json
import re
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from lakeshift.errors import LakeshiftError
from lakeshift.io import atomic_write
from lakeshift.scoring import VERDICTS, ScoredRecord, ScoringMap, last_boxed

MAX_OUTPUT_CHARS = 20_000
IMAGE_PX = 160
_TOKEN = re.compile(r"[^\s,;]+")
_MOVE_TOKENS = {"UP", "DOWN", "LEFT", "RIGHT", "U", "D", "L", "R"}


def move_spans(output: str) -> list[tuple[int, int]]:
    """Character spans of the moves inside the last ``\\boxed{}`` (one span per move; default rules)."""
    box = last_boxed(output)
    if box is None:
        return []
    content, start, _ = box
    spans = []
    for m in _TOKEN.finditer(content):
        tok = m.group().strip("\"'`.()[]<>*$")
        offset = m.start() + m.group().find(tok) if tok else m.start()
        if tok.upper() in _MOVE_TOKENS:
            spans.append((start + offset, start + offset + len(tok)))
        elif re.fullmatch(r"[UDLR]+", tok):
            spans += [(start + offset + i, start + offset + i + 1) for i in range(len(tok))]
    return spans


def failing_marks(output: str, rec: ScoredRecord, compat: str | None, cot: str | None) -> list[list]:
    """``[start, end, label]`` spans to highlight: the failing move of the answer and the diverging step."""
    marks: list[list] = []
    verdict = rec.verdict
    box = last_boxed(output)
    spans = move_spans(output) if compat is None else []
    fell_at, reached = rec.fell_at, rec.reached_goal_at
    if verdict == "fell_in_hole" and fell_at and len(spans) >= fell_at:
        s, e = spans[fell_at - 1]
        marks.append([s, e, f"step {fell_at}: falls in a hole"])
    elif verdict == "passed_goal" and reached is not None and len(spans) > reached:
        s, e = spans[reached]
        marks.append([s, e, f"step {reached + 1}: walks on past the goal"])
    elif verdict in ("unparseable", "stopped_short", "no_answer") and box is not None:
        marks.append([box[1], box[2], f"{verdict}: {rec.detail or 'answer'}"])
    trace = rec.trace
    step = trace.divergence_step if trace is not None else None
    if trace is not None and step and cot:
        span = step_span(output, cot, step)
        if span is not None:
            marks.append([span[0], span[1], f"trace step {step}: {trace.divergence}"])
    return sorted(marks)


def step_span(output: str, cot: str, step: int) -> tuple[int, int] | None:
    """Where trace step ``step`` (1-based) lies in the output: its map block, else its announcement."""
    from lakeshift import traces

    if cot in traces.PATH_COTS:
        return traces.path_step_span(output, cot, step)
    try:
        steps = traces.parse_steps(output, cot)
    except ValueError:
        return None
    cursor = 0
    for k, st in enumerate(steps[:step], start=1):
        needle = st.state_text
        if needle is None and st.move is not None:
            needle = f"I will move {st.move}"
        if needle is None:
            continue
        at = output.find(needle, cursor)
        if at < 0:
            return None
        cursor = at + len(needle)
        if k == step:
            return at, cursor
    return None


class ExampleSampler:
    """Collects a stratified sample of examples (with outputs) while files are scored one by one."""

    def __init__(self, n_examples: int, n_strata_hint: int = 1) -> None:
        self.per_file = max(4, -(-n_examples // max(1, n_strata_hint))) if n_examples > 0 else 0
        self._examples: list[dict[str, Any]] = []
        self.images: dict[str, str] = {}

    def offer(
        self,
        scored: Sequence[ScoredRecord],
        pf: Any,
        maps: Mapping[str, ScoringMap],
        *,
        compat: str | None,
        images_dir: Path | None,
    ) -> None:
        """Picks this file's share of examples: round robin over ``(size, verdict)`` strata, file order."""
        if not self.per_file:
            return
        strata: dict[tuple, list[ScoredRecord]] = {}
        for rec in scored:
            strata.setdefault((rec.size, VERDICTS.index(rec.verdict)), []).append(rec)
        order = sorted(strata)
        picked: list[ScoredRecord] = []
        depth = 0
        while len(picked) < self.per_file and any(len(strata[k]) > depth for k in order):
            for k in order:
                if len(strata[k]) > depth and len(picked) < self.per_file:
                    picked.append(strata[k][depth])
            depth += 1
        for rec in picked:
            sm = maps[rec.id]
            pred = pf.predictions.get(rec.id)
            output = pred.output if pred is not None and pred.output is not None else ""
            cot = rec.cot_format
            key = f"{sm.split}/{sm.id}"
            if images_dir is not None and key not in self.images:
                self._add_image(key, images_dir / f"{sm.id}.png")
            m = sm.map
            positions = [list(m.start)]
            pos = m.start
            for move in rec.moves[: rec.fell_at or len(rec.moves)]:
                pos = m.step(pos, move)
                positions.append(list(pos))
            trace = rec.trace
            self._examples.append(
                {
                    "run": _run_label(rec),
                    "split": str(rec.split),
                    "size": rec.size,
                    "d_inf": rec.d_inf,
                    "opt_len": rec.optimal_length,
                    "id": rec.id,
                    "verdict": rec.verdict,
                    "detail": rec.detail or "",
                    "moves": list(rec.moves),
                    "optimal": list(sm.record.get("optimal_path") or m.optimal_path()),
                    "rows": m.rows,
                    "img": key if key in self.images else None,
                    "path": positions,
                    "fell_at": rec.fell_at,
                    "trace": {
                        k: v
                        for k, v in (
                            ("trace_divergence_step", trace.divergence_step),
                            ("trace_divergence", trace.divergence),
                            ("trace_answer_agrees", trace.answer_agrees),
                        )
                        if v is not None
                    }
                    if trace is not None
                    else {},
                    "output": output[:MAX_OUTPUT_CHARS],
                    "truncated": len(output) > MAX_OUTPUT_CHARS,
                    "marks": [
                        mk for mk in failing_marks(output, rec, compat, cot) if mk[1] <= MAX_OUTPUT_CHARS
                    ],
                }
            )

    def _add_image(self, key: str, path: Path) -> None:
        if not path.is_file():
            return
        from PIL import Image

        try:
            with Image.open(path) as im:
                im = im.convert("RGB")
                im.thumbnail((IMAGE_PX, IMAGE_PX))
                buf = io.BytesIO()
                im.save(buf, format="PNG", optimize=True)
        except (OSError, ValueError, SyntaxError) as err:  # PIL's errors for a torn or non-PNG file
            raise LakeshiftError(f"{path}: not a readable PNG ({err}); regenerate the split") from None
        self.images[key] = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")

    def examples(self) -> list[dict[str, Any]]:
        return self._examples


def _run_label(rec: ScoredRecord) -> str:
    """``model | input_format | cot_format``: ``?`` for a part the record lacks, ``None`` for a null one."""
    parts = (("model", rec.model), ("input_format", rec.input_format), ("cot_format", rec.cot_format))
    return " | ".join("?" if v is None and k not in rec.extra else str(v) for k, v in parts)


#: What the embedded JSON must not hold literally: ``</script`` would close its element and ``<!--`` open
#: a comment that swallows the page's own script (JSON strings allow the \u escapes); U+2028/9 end lines
#: in older JavaScript parsers.
_SCRIPT_UNSAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _json_script(obj: Any) -> str:
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return "".join(_SCRIPT_UNSAFE.get(ch, ch) for ch in text)


def write_report(
    path: Path,
    *,
    tables: Sequence[Any],
    figures: Mapping[str, Path],
    examples: Sequence[Mapping[str, Any]],
    maps_images: Mapping[str, str],
    warnings: Sequence[str],
    summary: Mapping[str, Any],
) -> Path:
    """Writes the self-contained HTML page."""
    fig_html = []
    for title, png in figures.items():
        data = base64.b64encode(Path(png).read_bytes()).decode("ascii")
        fig_html.append(
            f'<figure><img alt="{escape(title)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{escape(title)}</figcaption></figure>"
        )
    warn_html = ""
    if warnings:
        items = "".join(f"<li>{escape(w)}</li>" for w in warnings[:500])
        more = f"<li>... {len(warnings) - 500} more in warnings.txt</li>" if len(warnings) > 500 else ""
        warn_html = f"<details><summary>{len(warnings)} warnings</summary><ul>{items}{more}</ul></details>"
    # What is unknown is left out rather than shown as "None".
    info = ", ".join(f"{escape(str(k))}: {escape(str(v))}" for k, v in summary.items() if v is not None)
    html = _TEMPLATE.format(
        css=_CSS,
        js=_JS,
        info=info,
        warnings=warn_html,
        tables="".join(t.to_html() for t in tables),
        figures="".join(fig_html),
        data=_json_script(
            {"examples": list(examples), "images": dict(maps_images), "verdicts": list(VERDICTS)}
        ),
    )
    with atomic_write(path) as f:
        f.write(html)
    return path


_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>lakeshift report</title>
<script>window.__errors=[];window.addEventListener("error",function(e){{window.__errors.push(String(e.message));}});</script>
<style>{css}</style></head>
<body data-ready="0">
<h1>lakeshift report</h1>
<p class="info">{info}</p>
{warnings}
<h2>Tables</h2>
<div class="tables">{tables}</div>
<h2>Plots</h2>
<div class="figures">{figures}</div>
<h2>Examples</h2>
<div id="filters">
 <label>Run <select id="f-run"></select></label>
 <label>Split <select id="f-split"></select></label>
 <label>Size <select id="f-size"></select></label>
 <label>Verdict <select id="f-verdict"></select></label>
 <span><b id="visible-count">0</b> of <span id="total-count">0</span> examples shown by the filters</span>
</div>
<div id="examples"></div>
<button id="more" type="button">Show more</button>
<pre id="js-errors"></pre>
<script type="application/json" id="report-data">{data}</script>
<script>{js}</script>
</body></html>
"""

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1400px}
table.results{border-collapse:collapse;margin:1em 0;font-size:12px}
table.results caption{text-align:left;font-weight:600;padding:4px 0}
table.results th,table.results td{border:1px solid #ccc;padding:2px 6px}
table.results td.num{text-align:right;font-variant-numeric:tabular-nums}
table.results tr.published th{text-align:left;background:#f3f3f3;font-style:italic;padding-top:6px}
table.results tr.ref td{color:#666;font-style:italic}
.figures img{max-width:100%;border:1px solid #eee}
#filters{position:sticky;top:0;background:#fff;padding:6px 0;border-bottom:1px solid #ccc}
#filters label{margin-right:1em}
.ex{border:1px solid #ccc;border-radius:4px;margin:8px 0;padding:8px;display:flex;gap:12px}
.ex .side{flex:0 0 auto}.ex .main{flex:1 1 auto;min-width:0}
.ex h3{margin:0 0 4px 0;font-size:14px}
.v-success{color:#2ca02c}.v-fell_in_hole{color:#1f77b4}.v-stopped_short{color:#ff7f0e}
.v-passed_goal{color:#9467bd}.v-unparseable{color:#d62728}.v-no_answer,.v-missing{color:#555}
.grid{display:grid;gap:1px;background:#999;border:1px solid #999;margin-top:4px}
.grid div{width:14px;height:14px;background:#dff1ff;font-size:9px;line-height:14px;text-align:center}
.grid .H{background:#1c3d7a}.grid .S{background:#ffd54f}.grid .G{background:#4caf50}
.grid .opt{box-shadow:inset 0 0 0 3px #4caf50}.grid .path{background:#ffab91}.grid .fell{background:#e53935}
pre.out{white-space:pre-wrap;word-break:break-word;background:#f7f7f7;padding:6px;max-height:420px;overflow:auto;
font-size:12px}
mark{background:#ffeb3b;outline:2px solid #e53935}
#js-errors:empty{display:none}#js-errors{color:#b00}
"""

_JS = r"""
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("report-data").textContent);
  var EX = DATA.examples, PAGE = 25, shown = PAGE;
  var F = {run: "f-run", split: "f-split", size: "f-size", verdict: "f-verdict"};
  function byValue(a, b) {
    var x = Number(a), y = Number(b);
    if (isNaN(x) || isNaN(y)) { return a < b ? -1 : a > b ? 1 : 0; }
    return x - y;
  }
  function uniq(key) {
    var seen = {};
    EX.forEach(function (e) { seen[String(e[key])] = 1; });
    return Object.keys(seen).sort(byValue);
  }
  function option(sel, value, text) {
    var o = document.createElement("option");
    o.value = value;
    o.textContent = text;
    sel.appendChild(o);
  }
  function fill(key) {
    var sel = document.getElementById(F[key]);
    var vals = uniq(key);
    if (key === "verdict") {
      vals = DATA.verdicts.filter(function (v) { return vals.indexOf(v) >= 0; });
    }
    sel.innerHTML = "";
    option(sel, "", "(all)");
    vals.forEach(function (v) { option(sel, v, v); });
    sel.addEventListener("change", function () { shown = PAGE; writeHash(); render(); });
  }
  function state() {
    var s = {};
    Object.keys(F).forEach(function (k) { s[k] = document.getElementById(F[k]).value; });
    return s;
  }
  function readHash() {
    var h = location.hash.replace(/^#/, "");
    if (!h) { return; }
    h.split("&").forEach(function (part) {
      var kv = part.split("=");
      var k = decodeURIComponent(kv[0]);
      var v = decodeURIComponent((kv[1] || "").replace(/\+/g, " "));
      if (!F[k]) { return; }
      var sel = document.getElementById(F[k]);
      var known = Array.prototype.some.call(sel.options, function (o) { return o.value === v; });
      if (!known) { option(sel, v, v + " (no examples)"); }
      sel.value = v;
    });
  }
  function writeHash() {
    var s = state(), parts = [];
    Object.keys(s).forEach(function (k) {
      if (s[k]) { parts.push(k + "=" + encodeURIComponent(s[k])); }
    });
    history.replaceState(null, "", "#" + parts.join("&"));
  }
  function esc(t) {
    return String(t).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
      .replace(/"/g, "&quot;");
  }
  function marked(text, marks) {
    var out = "", pos = 0;
    marks.forEach(function (m) {
      if (m[0] < pos) { return; }
      out += esc(text.slice(pos, m[0]));
      out += '<mark title="' + esc(m[2]) + '">' + esc(text.slice(m[0], m[1])) + "</mark>";
      pos = m[1];
    });
    return out + esc(text.slice(pos));
  }
  var DEL = {UP: [-1, 0], DOWN: [1, 0], LEFT: [0, -1], RIGHT: [0, 1]};
  function grid(e) {
    var n = e.rows.length, opt = {}, path = {}, r, c, p = null;
    for (r = 0; r < n; r++) {
      c = e.rows[r].indexOf("S");
      if (c >= 0) { p = [r, c]; }
    }
    opt[p[0] + "," + p[1]] = 1;
    e.optimal.forEach(function (m) {
      p = [p[0] + DEL[m][0], p[1] + DEL[m][1]];
      opt[p[0] + "," + p[1]] = 1;
    });
    e.path.forEach(function (q) { path[q[0] + "," + q[1]] = 1; });
    var last = e.path[e.path.length - 1];
    var fell = e.verdict === "fell_in_hole" ? last[0] + "," + last[1] : null;
    var h = '<div class="grid" style="grid-template-columns:repeat(' + n + ',14px)">';
    for (r = 0; r < n; r++) {
      for (c = 0; c < n; c++) {
        var ch = e.rows[r][c], k = r + "," + c, cls = [ch];
        if (path[k] && ch === "F") { cls.push("path"); }
        if (opt[k]) { cls.push("opt"); }
        if (k === fell) { cls.push("fell"); }
        h += '<div class="' + cls.join(" ") + '">' + (ch === "S" || ch === "G" ? ch : "") + "</div>";
      }
    }
    return h + "</div>";
  }
  function card(e) {
    var src = e.img && DATA.images[e.img];
    var img = src ? '<img alt="map" width="120" src="' + src + '">' : "";
    var tr = Object.keys(e.trace).map(function (k) {
      return k.replace("trace_", "") + ": " + e.trace[k];
    }).join("; ");
    var head = '<span class="v-' + e.verdict + '">' + e.verdict + "</span> &middot; " + esc(e.run) +
      " &middot; " + esc(e.split) + " &middot; map " + esc(e.id) + " (" + e.size + "x" + e.size +
      ", d_inf " + e.d_inf + ", optimal " + e.opt_len + ")";
    return '<div class="ex" data-verdict="' + e.verdict + '"><div class="side">' + img + grid(e) +
      '</div><div class="main"><h3>' + head + "</h3>" +
      (e.detail ? "<div>" + esc(e.detail) + "</div>" : "") +
      (tr ? "<div>trace: " + esc(tr) + "</div>" : "") +
      "<div>answer: " + esc(e.moves.join(", ") || "(none)") + "</div>" +
      "<div>optimal: " + esc(e.optimal.join(", ")) + "</div>" +
      '<pre class="out">' + marked(e.output, e.marks) + (e.truncated ? "\n[... truncated]" : "") +
      "</pre></div></div>";
  }
  function render() {
    var s = state();
    var sel = EX.filter(function (e) {
      return Object.keys(s).every(function (k) { return !s[k] || String(e[k]) === s[k]; });
    });
    document.getElementById("examples").innerHTML = sel.slice(0, shown).map(card).join("");
    document.getElementById("visible-count").textContent = String(sel.length);
    document.body.setAttribute("data-visible", String(sel.length));
    document.body.setAttribute("data-rendered", String(Math.min(shown, sel.length)));
    document.getElementById("more").style.display = sel.length > shown ? "" : "none";
  }
  Object.keys(F).forEach(fill);
  document.getElementById("total-count").textContent = String(EX.length);
  document.getElementById("more").addEventListener("click", function () { shown += PAGE; render(); });
  window.addEventListener("hashchange", function () { readHash(); render(); });
  readHash();
  render();
  document.getElementById("js-errors").textContent = window.__errors.join("\n");
  document.body.setAttribute("data-errors", String(window.__errors.length));
  document.body.setAttribute("data-ready", "1");
})();
"""
