// A bar chart of daily spend as inline SVG (built with DOM calls; no markup strings).

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs = {}, label) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  if (label !== undefined) node.textContent = label;
  return node;
}

// Drawn at the width it is shown at (one SVG unit a CSS pixel), and drawn again when that
// width changes: a chart scaled down from a wider drawing shrank its labels below legibility
// (11 px became ~5 px on a phone). Text is never scaled; ticks thin out instead.
const HEIGHT = 220;
const MAX_WIDTH = 760;
const TICK_SPACING = 64;  // px between the day labels at least

export function spendChart(history, dailyLimit) {
  const box = document.createElement("div");
  box.className = "chart-box";
  let drawn = 0;
  const draw = (width) => {
    if (width <= 0 || width === drawn) return;
    drawn = width;
    box.replaceChildren(spendSvg(history, dailyLimit, width));
  };
  draw(MAX_WIDTH);  // until it is laid out
  if (typeof ResizeObserver === "function") {
    new ResizeObserver((seen) => {
      for (const entry of seen) draw(Math.floor(Math.min(entry.contentRect.width, MAX_WIDTH)));
    }).observe(box);
  }
  return box;
}

function spendSvg(history, dailyLimit, width) {
  const height = HEIGHT, left = 56, bottom = 28, top = 12, right = 8;
  const values = history.map((d) => Number(d.totalCost || 0));
  const ceiling = Math.max(...values, dailyLimit || 0, 0.0001);
  const plotW = width - left - right, plotH = height - top - bottom;
  const step = plotW / Math.max(history.length, 1);
  const y = (v) => top + plotH - (v / ceiling) * plotH;
  const chart = svg("svg", {
    viewBox: `0 0 ${width} ${height}`, width, height, class: "chart", role: "img",
    "aria-label": "spend per day",
  });
  chart.append(svg("title", {}, "Spend per day (USD)"));
  for (const fraction of [0, 0.5, 1]) {
    const value = ceiling * fraction;
    chart.append(svg("line", { x1: left, x2: width - right, y1: y(value), y2: y(value),
      class: "grid" }));
    chart.append(svg("text", { x: left - 6, y: y(value) + 4, class: "axis", "text-anchor": "end" },
      `$${value.toFixed(value < 1 ? 3 : 2)}`));
  }
  const labels = Math.max(1, Math.floor(plotW / TICK_SPACING));
  const every = Math.max(1, Math.ceil(history.length / labels));
  history.forEach((day, i) => {
    const value = values[i];
    const x = left + i * step + step * 0.15;
    const over = dailyLimit && value > dailyLimit;
    const bar = svg("rect", { x, y: y(value), width: Math.max(step * 0.7, 1),
      height: Math.max(top + plotH - y(value), value > 0 ? 1 : 0),
      class: over ? "bar over" : "bar" });
    bar.append(svg("title", {}, `${day.date}: $${value.toFixed(6)} (${day.apiCalls} calls)`));
    chart.append(bar);
    // The last day's label, and every few days' before it while they keep their spacing.
    const last = history.length - 1;
    if (i === last || ((last - i) % every === 0 && (last - i) * step >= TICK_SPACING)) {
      chart.append(svg("text", { x: x + step * 0.35, y: height - 8, class: "axis",
        "text-anchor": "middle" }, day.date.slice(5)));
    }
  });
  if (dailyLimit) {
    chart.append(svg("line", { x1: left, x2: width - right, y1: y(dailyLimit),
      y2: y(dailyLimit), class: "limit" }));
    chart.append(svg("text", { x: width - right - 4, y: y(dailyLimit) + 14, class: "axis limit-label",
      "text-anchor": "end" }, `daily limit $${dailyLimit}`));
  }
  return chart;
}

export function meter(spent, limit, warning) {
  const ratio = limit ? Math.min(spent / limit, 1) : 0;
  const state = !limit ? "none" : ratio >= 1 ? "over" : ratio >= (warning || 0.8) ? "warn" : "ok";
  const bar = svg("svg", { viewBox: "0 0 100 8", class: `meter m-${state}`,
    preserveAspectRatio: "none", role: "img", "aria-label": `${Math.round(ratio * 100)} %` });
  bar.append(svg("rect", { x: 0, y: 0, width: 100, height: 8, class: "meter-back" }));
  bar.append(svg("rect", { x: 0, y: 0, width: ratio * 100, height: 8, class: "meter-fill" }));
  return bar;
}
