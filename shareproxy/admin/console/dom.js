// Every value from the cluster reaches the page as text: textContent, createTextNode or
// setAttribute. Nothing here parses HTML.
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value !== undefined && value !== null) node.setAttribute(name, String(value));
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function setText(node, value) {
  const text = value === null || value === undefined ? "–" : String(value);
  if (node.textContent !== text) node.textContent = text;
}

export function clear(node) {
  while (node.firstChild) node.firstChild.remove();
}

export function age(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  if (seconds < 3600) return `${(seconds / 60).toFixed(1)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}
