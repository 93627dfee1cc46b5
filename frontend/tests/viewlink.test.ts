// A shared link carries the colour mode and the open panel, in the page's address and in
// TensorBoard's hash, and brings them back; anything else in those keys is left out.
import { describe, expect, it } from 'vitest';
import { LINK_PANELS, panelOfTab, readHashState, readUrlState, writeHashState, writeUrlState, type UrlState } from '../src/state';

describe('links carry the colour mode and the open panel', () => {
  const st: UrlState = { run: 'r', tag: 't', step: 0, rank: 1, node: 'Module.a', colors: 'diagnosis', panel: 'search' };
  it('round-trips through the query string and TensorBoard\'s hash', () => {
    expect(readUrlState(writeUrlState('', st))).toMatchObject(st);
    const hash = writeHashState('#graph_ascend&smoothing=0.6', st);
    expect(hash).toContain('ga_colors=diagnosis');
    expect(hash).toContain('ga_panel=search');
    expect(readHashState(hash)).toMatchObject(st);
    for (const panel of Object.keys(LINK_PANELS) as (keyof typeof LINK_PANELS)[])
      for (const colors of ['precision', 'overflow', 'diagnosis'] as const) expect(readUrlState(writeUrlState('', { colors, panel }))).toMatchObject({ colors, panel });
  });
  it('names the precision filter "filter" and knows no other names', () => {
    expect(panelOfTab('precision')).toBe('filter');
    expect(panelOfTab('diagnosis')).toBe('diagnosis');
    expect(panelOfTab('map')).toBe('map');
    expect(panelOfTab(null)).toBeUndefined();
    expect(readUrlState('?colors=rainbow&panel=settings')).toMatchObject({ colors: undefined, panel: undefined });
  });
});
