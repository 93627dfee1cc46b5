/**
 * The toolbar's menus (`.popover` inside a `.popover-anchor`: shortcuts, pictures, Download
 * report): one open at a time, closed by Escape and by a press anywhere outside them.
 */

/** Closes every open menu but the one holding `inside` (none: all). */
export function closePopovers(root: ParentNode, inside: Node | null = null): void {
  root.querySelectorAll<HTMLElement>('.popover-anchor').forEach((anchor) => {
    if (inside && anchor.contains(inside)) return;
    anchor.querySelectorAll<HTMLElement>(':scope > .popover').forEach((pop) => {
      pop.style.display = 'none';
    });
  });
}

/** Escape and outside presses close the menus of `doc`. */
export function bindPopovers(doc: Document): void {
  doc.addEventListener('pointerdown', (e) => closePopovers(doc, e.target instanceof Node ? e.target : null), true);
  doc.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') closePopovers(doc);
  });
}
