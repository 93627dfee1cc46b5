/**
 * A virtualized list: fixed row height, only the rows in view exist in the DOM, so a list of a
 * million names scrolls as fast as one of ten. Keyboard-free; the owner drives the selection.
 */
export interface VListOptions<T> {
  rowHeight: number;
  render(item: T, index: number, el: HTMLElement): void;
  click(item: T, index: number): void;
  testid?: string;
}

export class VList<T> {
  readonly el: HTMLElement;
  private inner: HTMLElement;
  private items: T[] = [];
  private pool: HTMLElement[] = [];
  selected = -1;

  constructor(private opts: VListOptions<T>) {
    this.el = document.createElement('div');
    this.el.className = 'vlist';
    if (opts.testid) this.el.dataset.testid = opts.testid;
    this.inner = document.createElement('div');
    this.inner.className = 'vlist-inner';
    this.el.appendChild(this.inner);
    this.el.addEventListener('scroll', () => this.paint());
    new ResizeObserver(() => this.paint()).observe(this.el);
  }

  setItems(items: T[]): void {
    this.items = items;
    this.selected = -1;
    this.inner.style.height = `${items.length * this.opts.rowHeight}px`;
    this.el.scrollTop = 0;
    this.paint();
  }

  get length(): number {
    return this.items.length;
  }

  item(i: number): T | undefined {
    return this.items[i];
  }

  select(i: number): void {
    this.selected = i;
    const top = i * this.opts.rowHeight;
    if (top < this.el.scrollTop) this.el.scrollTop = top;
    else if (top + this.opts.rowHeight > this.el.scrollTop + this.el.clientHeight)
      this.el.scrollTop = top + this.opts.rowHeight - this.el.clientHeight;
    this.paint();
  }

  paint(): void {
    const h = this.opts.rowHeight;
    const first = Math.max(0, Math.floor(this.el.scrollTop / h) - 2);
    const count = Math.min(this.items.length - first, Math.ceil((this.el.clientHeight || 400) / h) + 4);
    while (this.pool.length < count) {
      const row = document.createElement('div');
      row.className = 'vlist-row';
      row.addEventListener('click', () => {
        const i = Number(row.dataset.index);
        const it = this.items[i];
        if (it !== undefined) this.opts.click(it, i);
      });
      this.inner.appendChild(row);
      this.pool.push(row);
    }
    for (let k = 0; k < this.pool.length; k++) {
      const row = this.pool[k];
      if (k >= count) {
        row.style.display = 'none';
        continue;
      }
      const i = first + k;
      row.style.display = '';
      row.style.top = `${i * h}px`;
      row.style.height = `${h}px`;
      row.dataset.index = String(i);
      row.classList.toggle('selected', i === this.selected);
      this.opts.render(this.items[i], i, row);
    }
  }
}
