// DOM helpers: every value from the API is inserted as text (createTextNode / textContent),
// never parsed as HTML, so a node named "<script>..." renders as those characters.

const SVG_NS = "http://www.w3.org/2000/svg";

function fill(node, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value !== null && value !== undefined && value !== false) node.setAttribute(key, String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function el(tag, attrs, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

export function svg(tag, attrs, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

export function clear(node) {
  node.replaceChildren();
  return node;
}

export function show(node, on) {
  node.hidden = !on;
}

export function byId(id) {
  return document.getElementById(id);
}

// A ratio (0..1) as a percentage; null is "unknown", never "0%".
export function percent(value) {
  return value === null || value === undefined ? "unknown" : `${(value * 100).toFixed(1)}%`;
}

export function interval(pair) {
  if (!pair) return null;
  return `95% CI ${percent(pair[0])} – ${percent(pair[1])}`;
}

export function known(value, unit) {
  if (value === null || value === undefined) return "unknown";
  return unit ? `${value} ${unit}` : String(value);
}

// "2026-01-10T12:00:00Z" -> "2026-01-10 12:00Z": UTC, as the API gives it.
export function when(text) {
  return text ? text.replace("T", " ").replace(/:\d\d(\.\d+)?Z$/, "Z") : "unknown";
}
