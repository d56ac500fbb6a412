// A group's lag, acquisition-lock timeouts and redeliveries as small fixed-size sparklines:
// sampled on each refresh and kept in the page for the last 10 minutes, so their history
// starts when the page opens. Counters are drawn as their increase between samples.
import { el, setText } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const KEEP_MS = 10 * 60 * 1000;
const WIDTH = 240;
const HEIGHT = 40;

function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  return node;
}

class Sparkline {
  constructor(id, label, counter) {
    this.label = label;
    this.counter = counter; // draw the increase between samples, not the value
    this.samples = []; // { t, v }: v is null while unknown
    this.previous = null;
    this.line = svg("polyline", { points: "", fill: "none", stroke: "currentColor", "stroke-width": 1.5 });
    this.box = svg("svg", {
      id, width: WIDTH, height: HEIGHT, viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img",
      "aria-label": label, "data-points": 0, "data-last": "",
    });
    this.box.append(this.line);
    this.now = el("span", { class: "muted" });
    this.node = el("figure", { class: "chart" }, el("figcaption", {}, label), this.box, this.now);
  }

  add(t, value) {
    let v = value;
    if (this.counter) {
      v = this.previous === null || value === null ? null : Math.max(0, value - this.previous);
      if (value !== null) this.previous = value;
    }
    this.samples.push({ t, v });
    while (this.samples.length && this.samples[0].t < t - KEEP_MS) this.samples.shift();
    this.draw(t, value);
  }

  draw(t, value) {
    const known = this.samples.filter((s) => s.v !== null);
    const top = Math.max(1, ...known.map((s) => s.v));
    // the line spans the chart: the history so far, up to the last 10 minutes
    const span = Math.max(1, t - this.samples[0].t);
    const points = known.map((s) => {
      const x = WIDTH - 1 - ((WIDTH - 2) * (t - s.t)) / span;
      const y = HEIGHT - 2 - ((HEIGHT - 4) * s.v) / top;
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    });
    this.line.setAttribute("points", points.join(" "));
    this.box.setAttribute("data-points", known.length);
    this.box.setAttribute("data-last", value ?? "");
    const minutes = ((t - this.samples[0].t) / 60000).toFixed(1);
    const text = this.counter
      ? `${known.reduce((sum, s) => sum + s.v, 0)} in ${minutes} min`
      : `now ${value ?? "–"}, max ${top} in ${minutes} min`;
    this.box.setAttribute("aria-label", `${this.label}: ${text}`);
    setText(this.now, text);
  }
}

export function groupCharts() {
  const lag = new Sparkline("chart-lag", "Lag", false);
  const timeouts = new Sparkline("chart-lock-timeouts", "Acquisition-lock timeouts", true);
  const redeliveries = new Sparkline("chart-redeliveries", "Redeliveries", true);
  return {
    section: [
      el("h2", {}, "Last 10 minutes"),
      el("p", { class: "muted" }, "Sampled on each refresh since this page opened."),
      el("div", { class: "charts" }, lag.node, timeouts.node, redeliveries.node),
    ],
    sample(totalLag, stats) {
      const t = Date.now();
      lag.add(t, totalLag);
      timeouts.add(t, stats.lock_timeouts);
      redeliveries.add(t, stats.redeliveries);
    },
  };
}
