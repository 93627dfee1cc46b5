/**
 * The file list (runs and their `.vis.db` files): read once at start and kept live by the server's
 * `watchMetaDir` event stream. Problems with files are listed in the data panel and announced by one
 * notice per new set (never a stack of dialogs).
 */
import { followSse, parseLooseJson, post, tidyError } from './api';
import type { ToastKind } from './ctx';
import { t } from './i18n';
import { naturalCompare } from './state';
import type { Store } from './store';
import type { Catalog, CatalogError } from './types';

export interface CatalogHost {
  readonly store: Store;
  toast(message: string, kind?: ToastKind): void;
  setStatus(message: string, error?: boolean): void;
  /** Files appeared in a logdir that had none: open the first one. */
  filesAppeared(): void;
  /** The one lasting notice about unreadable files (replaced, never stacked; '' removes it). */
  problemNotice(message: string): void;
}

export class CatalogWatch {
  private errorKey = '';
  private watching = false;

  constructor(private host: CatalogHost) {}

  /** Lists runs and files; false when the server could not (the error is shown). */
  async load(): Promise<boolean> {
    const s = this.host.store;
    const r = await post('load_meta_dir');
    if (!r.success || !r.data) {
      s.catalog = {};
      const msg = `load_meta_dir: ${r.error ?? 'failed'}`;
      s.catalogFailure = tidyError(msg);
      this.host.setStatus(msg, true);
      this.host.toast(msg, 'error');
      return false;
    }
    s.catalogFailure = '';
    this.apply(r.data, r.error);
    return true;
  }

  private apply(data: Catalog, errs: unknown): void {
    const s = this.host.store;
    const sorted: Catalog = {};
    for (const k of Object.keys(data).sort(naturalCompare)) sorted[k] = { ...data[k], tags: [...(data[k].tags ?? [])].sort(naturalCompare) };
    s.catalog = sorted;
    s.catalogErrors = Array.isArray(errs) ? (errs as CatalogError[]) : [];
    const key = JSON.stringify(s.catalogErrors);
    // The data panel lists the problems; each new set of them is announced by one notice, which
    // replaces the previous one (a file that became readable takes its notice away).
    if (key !== this.errorKey) this.host.problemNotice(s.catalogErrors.length ? t('catalogProblems', { count: s.catalogErrors.length }) : '');
    this.errorKey = key;
    s.changed('sider');
    if (s.tab === 'data') s.changed('panel');
  }

  /** Keep the file list live (the server pushes a new listing when files appear, change or go). */
  watch(): void {
    if (this.watching) return;
    this.watching = true;
    const s = this.host.store;
    const ctrl = new AbortController();
    let failures = 0;
    const loop = async () => {
      for (;;) {
        const err = await followSse('watchMetaDir', (data) => {
          failures = 0;
          let msg: { data?: Catalog; error?: unknown };
          try {
            msg = parseLooseJson(data) as typeof msg;
          } catch {
            return;
          }
          if (!msg || typeof msg !== 'object' || !msg.data) return;
          const before = JSON.stringify(s.catalog);
          this.apply(msg.data, msg.error);
          if (JSON.stringify(s.catalog) !== before && s.meta.run && !s.catalog[s.meta.run]?.tags.includes(s.meta.tag))
            this.host.setStatus(t('fileGone', { file: `${s.meta.run}/${s.meta.tag}` }), true);
          if (before === '{}' && Object.keys(s.catalog).length && !s.meta.run) this.host.filesAppeared();
        }, ctrl.signal);
        // An older server without the route answers 404: stop. Otherwise retry, slower each time.
        if (err && /HTTP 40[45]/.test(err)) return;
        failures++;
        if (failures > 20) return;
        await new Promise((r) => setTimeout(r, Math.min(30_000, 1000 * 2 ** Math.min(failures, 5))));
      }
    };
    void loop();
  }
}
