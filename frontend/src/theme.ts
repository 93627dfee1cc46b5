/** Light or dark: TensorBoard's own theme (its body's `dark-mode` class), else the system's, until the user picks one. */
import type { Store } from './store';

export function followTensorBoardTheme(store: Store, redraw: () => void): void {
  const read = () => {
    try {
      const body = window.parent !== window ? window.parent.document.body : null;
      return body ? body.classList.contains('dark-mode') : null;
    } catch {
      return null;
    }
  };
  const apply = () => {
    if (store.userTheme) return;
    const tb = read();
    const dark = tb ?? window.matchMedia?.('(prefers-color-scheme: dark)').matches ?? false;
    if (dark !== store.dark) {
      store.dark = dark;
      redraw();
    }
  };
  apply();
  try {
    if (window.parent !== window) new MutationObserver(apply).observe(window.parent.document.body, { attributes: true, attributeFilter: ['class'] });
  } catch {
    /* cross-origin parent: keep our own theme */
  }
}
