// A pane's picture as SVG: the same drawing code as the canvas (paintFrame), into SVG.
import { describe, expect, it } from 'vitest';
import { DARK, frameSvg, LIGHT, SvgPath, xmlText } from '../src/render';
import { Scene } from '../src/scene';
import type { RenderNode } from '../src/types';

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
    // The Char production of XML 1.0: what a well-formed document may hold at all.
    const notXml = /[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u;
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
