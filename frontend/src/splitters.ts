/** The draggable splitters: control panel width, NPU/Bench pane split, details height. */
export interface SplitterEls {
  root: HTMLElement;
  panel: HTMLElement;
  graphs: HTMLElement;
  npuWrap: HTMLElement;
  details: HTMLElement;
  dashboard: HTMLElement;
}

function drag(el: Element, onMove: (dx: number, dy: number) => void): void {
  el.addEventListener('mousedown', (e0) => {
    const e = e0 as MouseEvent;
    e.preventDefault();
    let x = e.clientX, y = e.clientY;
    const move = (m: MouseEvent) => {
      onMove(m.clientX - x, m.clientY - y);
      x = m.clientX;
      y = m.clientY;
    };
    const up = () => {
      window.removeEventListener('mousemove', move);
      window.removeEventListener('mouseup', up);
    };
    window.addEventListener('mousemove', move);
    window.addEventListener('mouseup', up);
  });
}

/** `detailsResized` runs after the details height changed by hand (the details are then shown). */
export function bindSplitters(els: SplitterEls, detailsResized: () => void): void {
  const panelSplit = els.root.querySelector('.panel-splitter');
  if (panelSplit)
    drag(panelSplit, (dx) => {
      const w = els.panel.getBoundingClientRect().width + dx;
      els.panel.style.width = `${Math.max(180, Math.min(window.innerWidth * 0.5, w))}px`;
    });
  const paneSplit = els.graphs.querySelector('.splitter');
  if (paneSplit)
    drag(paneSplit, (dx) => {
      const total = els.graphs.getBoundingClientRect().width;
      const w = els.npuWrap.getBoundingClientRect().width + dx;
      const frac = Math.max(0.15, Math.min(0.85, w / total));
      els.npuWrap.style.flex = `0 0 ${frac * 100}%`;
    });
  const detSplit = els.dashboard.querySelector('.splitter.horizontal');
  if (detSplit)
    drag(detSplit, (_dx, dy) => {
      const hgt = els.details.getBoundingClientRect().height - dy;
      els.details.style.height = `${Math.max(60, Math.min(window.innerHeight * 0.8, hgt))}px`;
      detailsResized();
    });
}
