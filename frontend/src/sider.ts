/** The narrow bar on the left: one button per side panel, the conversion page, theme and language. */
import type { PageCtx } from './ctx';
import { clear, h } from './dom';
import { lang, setLang, t, type Key } from './i18n';
import { icon, type IconName } from './icons';
import type { Tab } from './store';

export function renderSider(el: HTMLElement, ctx: PageCtx, redrawAll: () => void): void {
  const s = ctx.store;
  clear(el);
  const hasRuns = Object.keys(s.catalog).length > 0;
  const btn = (testid: string, glyph: IconName, title: Key, onClick: () => void, active = false) =>
    h('button.sider-btn', { testid, title: t(title), 'aria-label': t(title), class: active ? 'active' : '', on: { click: onClick } }, icon(glyph));
  const tabBtn = (tab: Exclude<Tab, null>, testid: string, glyph: IconName, title: Key) =>
    btn(testid, glyph, title, () => ctx.openTab(s.tab === tab && s.page === 'dashboard' ? null : tab), s.tab === tab && s.page === 'dashboard');
  el.append(tabBtn('data', 'dataSiderButton', 'data', 'sider.dataSelection'));
  if (hasRuns) {
    el.append(tabBtn('precision', 'precisionSiderButton', 'filter', 'sider.precisionFiltering'));
    if (s.config && !s.config.isSingleGraph) el.append(tabBtn('match', 'matchSiderButton', 'match', 'sider.nodeMatching'));
    el.append(tabBtn('search', 'searchSiderButton', 'search', 'sider.nodeSearch'));
    if (s.config && !s.config.isSingleGraph) el.append(tabBtn('diagnosis', 'diagnosisSiderButton', 'diagnosis', 'sider.diagnosis'));
    if (s.config && !s.config.isSingleGraph) el.append(tabBtn('map', 'mapSiderButton', 'divergenceMap', 'sider.map'));
  }
  el.append(btn('conversionSiderButton', 'convert', 'sider.dumpVisualization', () => ctx.showPage(s.page === 'convert' ? 'dashboard' : 'convert'), s.page === 'convert'));
  el.append(h('div.sider-spacer'));
  el.append(
    btn('themeSiderButton', s.dark ? 'light' : 'dark', 'sider.switchTheme', () => {
      s.userTheme = s.dark ? 'light' : 'dark';
      s.dark = !s.dark;
      redrawAll();
    }),
  );
  el.append(
    btn('languageSiderButton', 'language', 'sider.switchLanguage', () => {
      setLang(lang() === 'zh' ? 'en' : 'zh');
      s.meta.lang = lang();
      redrawAll();
    }),
  );
}
