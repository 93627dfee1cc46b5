/**
 * The module TensorBoard's plugin iframe imports (`import("./index.js").then(m => m.render())`).
 * The entry document has a strict CSP and a `<base href="plugin/graph_ascend/">`; rather than
 * building the app inside it, move the iframe to the plugin-served `index.html` (relative, so it
 * works under --path_prefix and port forwarding), carrying the query string and hash along.
 */
export function render(): void {
  const target = new URL('index.html', document.baseURI);
  target.search = window.location.search;
  target.hash = window.location.hash;
  window.location.replace(target.href);
}
