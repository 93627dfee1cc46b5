// A pane's picture as SVG: the same drawing code as the canvas (paintFrame), into SVG; and the
// whole-graph picture (every box laid out, a title block, the colour legend, the PNG's size limit).
import { describe, expect, it } from 'vitest';
import { DIAGNOSIS_COLORS } from '../src/diagnosis';
import { setLang, t } from '../src/i18n';
import { layoutAt, PNG_MAX_AREA, PNG_MAX_SIDE, PNG_SCALE, pngLayout, SVG_SCALE, wholeSvg, type PictureHeader } from '../src/picture';
import { DARK, frameSvg, LIGHT, SvgPath, xmlText } from '../src/render';
import { Scene } from '../src/scene';
import { Store } from '../src/store';
import { colorLegend, pictureHeader, pictureScaledNote, shapeLegend } from '../src/toolbar';
import type { RenderNode } from '../src/types';

/** The Char production of XML 1.0: what a well-formed document may hold at all. */
const NOT_XML = /[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u;

const node = (name: string, y: number, extra: Partial<RenderNode> = {}): RenderNode =>
  ({ name, label: name, x: 0, y, width: 120, height: 15, nodeType: 0, expand: false, isRoot: false, parentNode: 'root', matchedNodeLink: [], precisionIndex: 1, ...extra }) as unknown as RenderNode;

describe('SVG pictures', () => {
  const data = {
    root: node('root', 0, { isRoot: true, expand: true, height: 100, parentNode: '' }),
    a: node('a', 20),
    '</text><script>x</script>': node('</text><script>x</script>', 40),
  };
  const fills: Record<string, string> = { root: '#ffffff', a: 'rgb(243,115,112)' };
  const scene = new Scene(data, (n) => fills[n.name] ?? '#ffffff');
  const frame = (theme = LIGHT) => frameSvg({ scene, view: { scale: 0.5, tx: 10, ty: 5 }, width: 200, height: 100, dpr: 2, theme, overflowMode: false, selected: 'a' });
  it('draws every visible box in its fill, outline and the selection, in the view\'s transform and the theme\'s background', () => {
    const svg = frame();
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg" width="200" height="100"')).toBe(true);
    expect(svg).toContain('<rect width="200" height="100" fill="#ffffff"/>');
    expect(svg).toContain('transform="matrix(0.5 0 0 0.5 10 5)"');
    expect(svg).toContain('fill="rgb(243,115,112)"');
    expect(svg).toContain(`stroke="${LIGHT.selected}"`);
    expect((svg.match(/<path /g) ?? []).length).toBeGreaterThan(3);
    expect(frame(DARK)).toContain(`fill="${DARK.background}"`);
  });
  it('keeps names as data', () => {
    expect(xmlText('</text><script>x</script>')).toBe('&#60;/text&#62;&#60;script&#62;x&#60;/script&#62;');
    expect(frame()).not.toContain('<script>');
  });
  it('writes no character XML 1.0 forbids, whatever a name holds (issue 42 item 10)', () => {
    const notXml = NOT_XML;
    const names = ['a\u0001b', 'c\u0008d', 'e\u000Bf', 'g\u001Fh', 'i\uD800j', 'k\uFFFEl', 'tab\tkept', 'emoji \u{1F600}'];
    const crafted: Record<string, RenderNode> = { root: node('root', 0, { isRoot: true, expand: true, height: 200, parentNode: '' }) };
    names.forEach((n, i) => (crafted[n] = node(n, 20 + 20 * i)));
    const svg = frameSvg({ scene: new Scene(crafted, () => '#ffffff'), view: { scale: 1, tx: 0, ty: 0 }, width: 400, height: 200, dpr: 1, theme: LIGHT, overflowMode: false, selected: undefined });
    expect(svg).not.toMatch(notXml);
    for (const [raw, shown] of [['a\u0001b', 'a\uFFFDb'], ['g\u001Fh', 'g\uFFFDh'], ['i\uD800j', 'i\uFFFDj'], ['k\uFFFEl', 'k\uFFFDl']]) {
      expect(svg, raw).toContain(`>${shown}</text>`);
    }
    expect(svg).toContain('>emoji \u{1F600}</text>');
    expect(xmlText('\u0000\u000B\u000C\uDFFF\uFFFF')).toBe('\uFFFD'.repeat(5));
    expect(xmlText('\t\n\r \uE000\uFFFD')).toBe('\t\n\r \uE000\uFFFD');
  });
  it('writes the shapes as a Path2D draws them', () => {
    const p = new SvgPath();
    p.rect(1, 2, 3, 4);
    p.roundRect(0, 0, 20, 10, 5);
    expect(p.d).toBe('M1 2h3v4h-3ZM5 0h10a5 5 0 0 1 5 5v0a5 5 0 0 1 -5 5h-10a5 5 0 0 1 -5 -5v0a5 5 0 0 1 5 -5Z');
  });
});

/** A compare file's store: step 2, rank 1, micro-batch 3, in the given colour mode. */
function compareStore(mode: Store['mode'], task = 'summary'): Store {
  const store = new Store();
  store.meta = { ...store.meta, run: 'run_a', tag: 'compare_1', step: 2, rank: 1, microStep: 3 };
  store.config = { microSteps: 4, overflowCheck: true, isSingleGraph: false, colors: {}, matchedConfigFiles: [], task, ranks: [0, 1], steps: [0, 2] };
  store.mode = mode;
  return store;
}

describe('whole-graph pictures', () => {
  // A graph far taller than any pane: a box 5000 units down, one 800 units right, each outside every view.
  const data: Record<string, RenderNode> = {
    root: node('root', 0, { isRoot: true, expand: true, width: 1000, height: 5100, parentNode: '' }),
    top: node('top', 20),
    'far.down': node('far.down', 5000),
    'far.right': { ...node('far.right', 40), x: 800 } as RenderNode,
  };
  const scene = new Scene(data, (n) => (n.name === 'far.down' ? 'rgb(243,115,112)' : '#ffffff'));
  const header: PictureHeader = {
    title: 'run_a/compare_1 · Debug',
    lines: ['step 2 · rank 1 · micro-batch 3', 'Colours: where the error is introduced'],
    legend: [{ color: '#ff0000', label: 'error introduced here' }, { color: '#ffffff', label: 'agrees with golden' }],
  };

  it('draws every laid-out box, also those outside the view, under the title and the legend', () => {
    const svg = wholeSvg({ scene, theme: LIGHT, overflowMode: false, header, selected: 'far.down' });
    const l = layoutAt(scene.bounds, header, SVG_SCALE);
    expect(svg.startsWith(`<svg xmlns="http://www.w3.org/2000/svg" width="${l.width}" height="${l.height}"`)).toBe(true);
    // As large as the scene at one pixel per unit, and the header above it.
    expect(l.width).toBeGreaterThanOrEqual(scene.bounds.x1 - scene.bounds.x0);
    expect(l.height).toBeGreaterThan(5100);
    for (const label of ['>top<', '>far.down<', '>far.right<']) expect(svg).toContain(label);
    expect(svg).toContain('fill="rgb(243,115,112)"');
    expect(svg).toContain(`stroke="${LIGHT.selected}"`);
    for (const words of [header.title, ...header.lines, ...header.legend.map((e) => e.label)]) expect(svg).toContain(`>${xmlText(words)}</text>`);
    expect(svg).toContain('text-anchor="start"');
    // The graph sits below the header: its first box is under the last legend row.
    const legendY = Math.max(...l.legend.map((e) => e.y));
    expect(l.view.ty + 20 * l.scale).toBeGreaterThan(legendY + 6);
    expect(wholeSvg({ scene, theme: DARK, overflowMode: false, header })).toContain(`fill="${DARK.background}"`);
  });

  it('replaces what XML forbids in the title, the lines and the legend', () => {
    const crafted: PictureHeader = {
      title: 'run\u0001/tag</text><script>x</script>',
      lines: ['step \uFFFE'],
      legend: [{ color: '#ffffff', label: 'lone \uD800 surrogate & more' }],
    };
    const svg = wholeSvg({ scene, theme: LIGHT, overflowMode: false, header: crafted });
    expect(svg).not.toMatch(NOT_XML);
    expect(svg).not.toContain('<script>');
    expect(svg).toContain('>run\uFFFD/tag&#60;/text&#62;&#60;script&#62;x&#60;/script&#62;</text>');
    expect(svg).toContain('>step \uFFFD</text>');
    expect(svg).toContain('>lone \uFFFD surrogate &#38; more</text>');
  });

  it('draws the PNG at two pixels a unit, and scales a graph down to the browser\'s limits, saying so', () => {
    const note = (p: number) => `scaled to ${p} %`;
    const small = pngLayout(scene.bounds, header, note);
    expect(small.capped).toBe(false);
    expect(small.scale).toBe(PNG_SCALE);
    expect(small.lines.map((x) => x.text)).toEqual(header.lines);

    const fits = (w: number, h: number) => w <= PNG_MAX_SIDE && h <= PNG_MAX_SIDE && w * h <= PNG_MAX_AREA;
    // Tall (the side limit binds) and large (the area limit binds).
    for (const bounds of [{ x0: 0, y0: 0, x1: 300, y1: 60_000 }, { x0: -100, y0: 0, x1: 9_000, y1: 9_000 }]) {
      const l = pngLayout(bounds, header, note);
      expect(l.capped, JSON.stringify(bounds)).toBe(true);
      expect(fits(l.width, l.height), `${l.width}×${l.height}`).toBe(true);
      expect(l.scale).toBeLessThan(PNG_SCALE);
      // The largest scale that fits: 1 % more does not.
      const more = layoutAt(bounds, { ...header, lines: [...header.lines, note(0)] }, l.scale * 1.01, PNG_MAX_SIDE);
      expect(fits(more.width, more.height), `${more.width}×${more.height}`).toBe(false);
      // The title says how far: the scale kept, in % of the full one.
      const said = l.lines.at(-1)?.text ?? '';
      expect(said).toMatch(/^scaled to [\d.]+ %$/);
      expect(Number(/[\d.]+/.exec(said)?.[0])).toBeCloseTo((l.scale / PNG_SCALE) * 100, 0);
      // The graph is inside the picture.
      expect(l.view.tx + bounds.x0 * l.scale).toBeGreaterThanOrEqual(0);
      expect(l.view.ty + bounds.y1 * l.scale).toBeLessThanOrEqual(l.height);
    }
    expect(pictureScaledNote(12.5)).toContain(String(PNG_MAX_SIDE));
  });

  it('titles the picture with the file, the point and the colour mode, and draws the toolbar\'s legend, in English and Chinese', () => {
    try {
      for (const lang of ['en', 'zh'] as const) {
        setLang(lang);
        const s = compareStore('diagnosis');
        const h = pictureHeader(s, 'Bench');
        expect(h.title).toBe(`run_a/compare_1 · ${t('bench')}`);
        expect(h.lines[0]).toBe(`${t('where.point', { step: 2, rank: 1 })} · ${t('where.micro', { micro: 3 })}`);
        expect(h.lines[1]).toBe(t('picture.colours', { mode: t('diag.modeIntroduced') }));
        // The same entries as the toolbar's legend, the peer-rank colour among them.
        expect(h.legend).toEqual(colorLegend(s));
        expect(h.legend.map((e) => e.label)).toEqual([...['source', 'peer', 'inherited', 'fine'].map((v) => t(`legend.${v}` as 'legend.source')), t('legend.sourcesInside'), t('unmatched')]);
        expect(h.legend[1].color).toBe(DIAGNOSIS_COLORS.peer);
        const svg = wholeSvg({ scene, theme: LIGHT, overflowMode: false, header: h });
        for (const words of [h.title, ...h.lines, ...h.legend.map((e) => e.label)]) expect(svg).toContain(`>${xmlText(words)}</text>`);
        // After the colours, what the shapes mean (the toolbar's four), each beside its words.
        expect(h.shapes).toEqual(shapeLegend());
        expect(h.shapes?.map((e) => [e.shape, e.label])).toEqual([['module', t('legend.module')], ['leaf', t('legend.leaf')], ['apilist', t('legend.apiList')], ['fused', t('legend.fused')]]);
        const l = layoutAt(scene.bounds, h, 1);
        expect(l.legend.map((e) => e.entry.label)).toEqual([...h.legend, ...(h.shapes ?? [])].map((e) => e.label));
        for (const e of h.shapes ?? []) expect(svg).toContain(`>${xmlText(e.label)}</text>`);
        const bare = wholeSvg({ scene, theme: LIGHT, overflowMode: false, header: { ...h, shapes: [] } });
        // The SVG path's arcs, in the fill and in the outline: an ellipse's two half arcs (`A`), three rounded boxes' four corners (`a`).
        const arcs = (doc: string, cmd: string) => (doc.match(new RegExp(`${cmd}[\\d.]`, 'g')) ?? []).length;
        expect(arcs(svg, 'A') - arcs(bare, 'A')).toBe(2 * 2);
        expect(arcs(svg, 'a') - arcs(bare, 'a')).toBe(2 * 3 * 4);
      }
      setLang('en');
      expect(pictureHeader(compareStore('overflow'), 'NPU').lines[1]).toBe('Colours: overflow level');
      expect(pictureHeader(compareStore('precision'), 'NPU').lines[1]).toBe('Colours: output error (msprobe)');
      const structure = pictureHeader(compareStore('precision', 'structure'), 'NPU');
      expect(structure.lines[1]).toBe('Colours: matched or not (a structure-only comparison)');
      expect(structure.legend.map((e) => e.label)).toEqual(['Matched', 'Unmatched (debug side: added; bench side: removed)']);
      const all = compareStore('precision');
      all.meta.microStep = -1;
      expect(pictureHeader(all, 'NPU').lines[0]).toBe('step 2 · rank 1 · all micro-batches');
    } finally {
      setLang('en');
    }
  });
});
