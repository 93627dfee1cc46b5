import { afterEach, describe, expect, it } from 'vitest';
import {
  BUCKETS,
  cellCenter,
  cellColor,
  cellLines,
  cellTarget,
  keepColumns,
  rankTick,
  rankTicks,
  sourceColumns,
  stepLabel,
  cellWidth,
  columnsFor,
  fitColumns,
  columnText,
  contentSize,
  cssRgb,
  heldCells,
  hitAt,
  lineOf,
  MAP_GEOMETRY,
  mapLines,
  MAX_MAP_COLUMNS,
  NON_FINITE,
  NON_FINITE_BUCKET,
  numberText,
  PALETTE,
  PALETTE_RGB,
  PEER_ALPHA,
  RASTER_ROWS,
  rasterLines,
  ratioBucket,
  ratioValue,
  rowKey,
  scaleColor,
  scalePosition,
  scaleRgb,
  stepSpans,
  UNCOMPARED,
  UNCOMPARED_BUCKET,
  visibleRange,
  type DivergenceMapCell,
  type DivergenceMapColumn,
  type DivergenceMapData,
  type DivergenceMapRow,
  type MapLine,
} from '../src/divergenceMap';
import { setLang } from '../src/i18n';

afterEach(() => setLang('en'));

const cell = (over: Partial<DivergenceMapCell> = {}): DivergenceMapCell => ({
  held: true,
  ratio: 0.5,
  err: 0.01,
  tolerance: 0.02,
  step: 0,
  rank: 0,
  micro_step: 0,
  node: 'Module.layers.0.Block.forward.0',
  sources: 0,
  source: '',
  ...over,
});
const col = (step: number, a: number, b = a): DivergenceMapColumn => ({ step, rank_first: a, rank_last: b, width: b - a + 1 });
const row = (label: string, depth: number, cells: DivergenceMapCell[]): DivergenceMapRow => ({ module: `Module.${label}.X.forward`, label, depth, cells });

function map(): DivergenceMapData {
  const columns = [col(0, 0), col(0, 1), col(1, 0), col(1, 1)];
  const four = () => columns.map((c) => cell({ step: c.step, rank: c.rank_first }));
  return {
    mode: 'statistics',
    depth: 2,
    depth_rule: 'repeated_blocks',
    axis: 'ranks',
    steps: [0, 1],
    ranks: [0, 1],
    columns,
    bands: [
      { direction: 'forward', rows: [row('layers.0', 2, four()), row('layers.1', 2, four())] },
      { direction: 'backward', rows: [row('layers.1', 2, four())] },
    ],
    first_source: { band: 0, row: 1, column: 3, step: 1, rank: 1, node: 'Functional.linear.3.forward' },
  };
}

describe('the colour scale', () => {
  it('reads the route\'s non-finite texts and nulls', () => {
    expect(ratioValue(2)).toBe(2);
    expect(ratioValue('Infinity')).toBe(Infinity);
    expect(ratioValue('-Infinity')).toBe(-Infinity);
    expect(ratioValue('NaN')).toBeNaN();
    expect(ratioValue(null)).toBeNull();
    expect(ratioValue(undefined)).toBeNull();
  });

  it('is logarithmic: the tolerance in the middle, a thousandth and below green, a thousand times and above red', () => {
    expect(scalePosition(1)).toBeCloseTo(0.5);
    expect(scalePosition(1e-3)).toBe(0);
    expect(scalePosition(0)).toBe(0);
    expect(scalePosition(1e-9)).toBe(0);
    expect(scalePosition(1e3)).toBe(1);
    expect(scalePosition(1e9)).toBe(1);
    expect(scalePosition(10)).toBeCloseTo(4 / 6);
    expect(scalePosition(0.1)).toBeCloseTo(2 / 6);
    // Equal steps of log10 are equal steps of the scale.
    expect(scalePosition(100)! - scalePosition(10)!).toBeCloseTo(scalePosition(10)! - scalePosition(1)!);
    expect(scalePosition(null)).toBeNull();
    expect(scalePosition(Infinity)).toBeNull();
    expect(scalePosition(NaN)).toBeNull();
  });

  it('runs from green through amber (at the tolerance) to red, monotonically redder', () => {
    expect(scaleColor(0)).toBe('rgb(226,241,226)');
    expect(scaleColor(0.5)).toBe('rgb(250,214,160)');
    expect(scaleColor(1)).toBe('rgb(229,72,77)');
    const green = (c: string) => Number(c.match(/\d+/g)![1]);
    for (let k = 1; k < BUCKETS; k++) expect(green(PALETTE[k])).toBeLessThanOrEqual(green(PALETTE[k - 1]));
    expect(green(PALETTE[BUCKETS - 1])).toBeLessThan(green(PALETTE[0]));
  });

  it('buckets every cell: on the scale, not compared, or inf/NaN', () => {
    expect(ratioBucket(0)).toBe(0);
    expect(ratioBucket(1)).toBe(Math.round(0.5 * (BUCKETS - 1)));
    expect(ratioBucket(1e6)).toBe(BUCKETS - 1);
    expect(ratioBucket(null)).toBe(UNCOMPARED_BUCKET);
    expect(ratioBucket(NaN)).toBe(NON_FINITE_BUCKET);
    expect(ratioBucket(Infinity)).toBe(NON_FINITE_BUCKET);
    expect(cellColor(cell({ ratio: null }))).toBe(UNCOMPARED);
    expect(cellColor(cell({ ratio: 'Infinity' }))).toBe(NON_FINITE);
    expect(cellColor(cell({ ratio: 'NaN' }))).toBe(NON_FINITE);
    expect(cellColor(cell({ ratio: 1e-5 }))).toBe(scaleColor(0));
  });
});

describe('columns for the panel\'s width', () => {
  it('asks for what the width holds at the narrowest cell, times the zoom, within the route\'s bound', () => {
    const fit = Math.floor((600 - MAP_GEOMETRY.label) / MAP_GEOMETRY.minCell);
    expect(columnsFor(600, 1)).toBe(fit);
    expect(columnsFor(600, 4)).toBe(fit * 4);
    expect(columnsFor(600, 1e6)).toBe(MAX_MAP_COLUMNS);
    expect(columnsFor(10, 1)).toBe(1);
    expect(fitColumns(600)).toBe(fit - (fit % 8));
    expect(fitColumns(603)).toBe(fitColumns(600));
    expect(fitColumns(10)).toBe(8);
  });

  it('spreads few columns wide (to a bound) and many at the narrowest; zoom widens', () => {
    expect(cellWidth(600, 2)).toBe(MAP_GEOMETRY.maxCell);
    expect(cellWidth(600, 10_000)).toBe(MAP_GEOMETRY.minCell);
    expect(cellWidth(MAP_GEOMETRY.label + 300, 100)).toBe(3);
    expect(cellWidth(MAP_GEOMETRY.label + 300, 100, 4)).toBe(12);
  });
});

describe('lines, hits and views', () => {
  it('lists each band\'s title and rows; an opened row shows the deeper rows inside it', () => {
    const data = map();
    expect(mapLines(data, new Set(), () => undefined).map((l) => (l.kind === 'band' ? l.direction : l.row.label))).toEqual(['forward', 'layers.0', 'layers.1', 'backward', 'layers.1']);
    const deeper = map();
    deeper.depth = 3;
    deeper.bands = [{ direction: 'forward', rows: [row('layers.0.attn', 3, []), row('layers.0.mlp', 3, []), row('layers.1.attn', 3, []), row('layers.10', 3, [])] }];
    const open = new Set([rowKey('forward', data.bands[0].rows[0])]);
    const lines = mapLines(data, open, (d) => (d === 3 ? deeper : undefined));
    expect(lines.map((l) => (l.kind === 'band' ? l.direction : `${l.indent}:${l.row.label}`))).toEqual(['forward', '0:layers.0', '1:layers.0.attn', '1:layers.0.mlp', '0:layers.1', 'backward', '0:layers.1']);
    // Not for a deeper map of other columns (another width), nor before it is here.
    deeper.columns = deeper.columns.slice(1);
    expect(mapLines(data, open, () => deeper)).toHaveLength(5);
    expect(lineOf(lines, data, 0, 1)).toBe(4);
    expect(lineOf(lines, data, 1, 0)).toBe(6);
    expect(lineOf(lines, data, 5, 0)).toBe(-1);
  });

  it('finds the line and column under a point, scrolled or not, and back', () => {
    const v = { cw: 10, columns: 4, lines: 5, scrollX: 0, scrollY: 0 };
    const { label: L, header: H, row: R } = MAP_GEOMETRY;
    expect(hitAt(v, L + 5, H - 1)).toBeNull();
    expect(hitAt(v, L + 5, H + 1)).toEqual({ line: 0, column: 0 });
    expect(hitAt(v, L - 1, H + R + 1)).toEqual({ line: 1, column: null });
    expect(hitAt(v, L + 35, H + 4 * R + 1)).toEqual({ line: 4, column: 3 });
    expect(hitAt(v, L + 45, H + 1)).toEqual({ line: 0, column: null });
    expect(hitAt(v, L + 5, H + 5 * R + 1)).toBeNull();
    const scrolled = { ...v, scrollX: 20, scrollY: R };
    expect(hitAt(scrolled, L + 5, H + 1)).toEqual({ line: 1, column: 2 });
    for (const [line, column] of [[1, 2], [3, 2], [4, 3]]) {
      const p = cellCenter(scrolled, line, column);
      expect(hitAt(scrolled, p.x, p.y)).toEqual({ line, column });
    }
    expect(contentSize(v)).toEqual({ width: L + 40, height: H + 5 * R });
    expect(visibleRange({ ...v, columns: 1000, lines: 100, scrollX: 95, scrollY: 3 * R }, L + 50, H + 4 * R)).toEqual({ line0: 3, line1: 7, col0: 9, col1: 15 });
  });

  it('groups the columns by step', () => {
    expect(stepSpans([col(0, 0), col(0, 1), col(3, 0), col(3, 1), col(4, 0)])).toEqual([[0, 0, 2], [3, 2, 4], [4, 4, 5]]);
    expect(stepSpans([])).toEqual([]);
  });
});

describe('hover and click', () => {
  it('says the numbers, the merged ranks, the sources and the peer', () => {
    const c = cell({ ratio: 2.5, err: 0.05, tolerance: 0.02, rank: 7, sources: 2, source: 'Functional.linear.3.forward', source_rank: 5, from_rank: 3 });
    const lines = cellLines({ label: 'layers.2' }, 'forward', col(1, 0, 127), c);
    expect(lines).toEqual([
      'layers.2 · forward',
      'step 1 · ranks 0–127',
      'worst: rank 7',
      'error 0.05 / tolerance 0.02 = 2.5×',
      '2 source(s) inside, first Functional.linear.3.forward (rank 5)',
      'error received from rank 3',
      'Module.layers.0.Block.forward.0',
    ]);
    expect(cellLines({ label: 'layers.2' }, 'backward', col(0, 4), cell({ held: false }))).toEqual(['layers.2 · backward', 'step 0 · rank 4', 'this rank does not hold the module']);
    expect(cellLines({ label: 'x' }, 'update', col(0, 4), cell({ ratio: null }))[2]).toBe('not matched, or no output that compares');
    setLang('zh');
    expect(cellLines({ label: 'layers.2' }, 'forward', col(1, 0, 127), c)[0]).toBe('layers.2 · 前向');
  });

  it('writes columns and numbers as people read them', () => {
    expect(columnText(col(2, 5))).toBe('step 2 · rank 5');
    expect(columnText({ ...col(2, 5), micro_first: 0, micro_last: 7 })).toBe('step 2 · rank 5 · micro-batch 0–7');
    expect(numberText(null)).toBe('—');
    expect(numberText('Infinity')).toBe('inf');
    expect(numberText('NaN')).toBe('NaN');
    expect(numberText(0)).toBe('0');
    expect(numberText(0.123456)).toBe('0.123');
    expect(numberText(1.5e-6)).toBe('1.50e-6');
    expect(numberText(2.5e7)).toBe('2.50e7');
  });

  it('opens the cell\'s step and rank at its module; a blank cell opens nothing', () => {
    const c = cell({ step: 3, rank: 9, micro_step: 2, node: 'Module.layers.1.Block.forward.2' });
    expect(cellTarget(c, 'ranks')).toEqual({ step: 3, rank: 9, node: 'Module.layers.1.Block.forward.2', source: false });
    expect(cellTarget(c, 'micro_batches')).toEqual({ step: 3, rank: 9, node: 'Module.layers.1.Block.forward.2', microStep: 2, source: false });
    expect(cellTarget(cell({ held: false, node: '' }), 'ranks')).toBeNull();
  });

  it('opens a cell holding sources at its first source, on that source\'s rank', () => {
    const c = cell({ step: 2, rank: 0, node: 'Module.layers.1.Block.forward.2', sources: 2, source: 'Functional.linear.3.forward', source_rank: 5 });
    expect(cellTarget(c, 'ranks')).toEqual({ step: 2, rank: 5, node: 'Functional.linear.3.forward', source: true });
  });
});

describe('the axes', () => {
  const width = (s: string) => s.length * 6;
  it('labels a step by what fits: "step 3", "3", nothing', () => {
    expect(stepLabel(3, 100, width)).toBe('step 3');
    expect(stepLabel(3, 12, width)).toBe('3');
    expect(stepLabel(3, 5, width)).toBe('');
  });
  it('ticks the ranks without overlap at any cell width', () => {
    const cols = Array.from({ length: 8 }, (_, r) => col(0, r));
    // Wide cells: every column; narrow ones: every few, never closer than a tick's text.
    expect(rankTicks(cols, 0, 8, 28, width).map(([k]) => k)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    const narrow = rankTicks(cols, 0, 8, 3, width);
    expect(narrow[0]).toEqual([0, 'r0']);
    for (let i = 1; i < narrow.length; i++) expect((narrow[i][0] - narrow[i - 1][0]) * 3).toBeGreaterThanOrEqual(width(narrow[i - 1][1]) + 4);
    expect(rankTick(col(0, 0, 127))).toBe('0–127');
  });
  it('keeps only the columns holding a source ("sources only")', () => {
    const cols = [col(0, 0), col(1, 0), col(2, 0)];
    const r0 = { label: 'layers.1', module: 'm', depth: 1, cells: [cell({}), cell({ sources: 1, source: 's' }), cell({})] };
    const data = { columns: cols, bands: [{ direction: 'forward', rows: [r0] }], first_source: { band: 0, row: 0, column: 1, step: 1, rank: 0, node: 's' } } as unknown as DivergenceMapData;
    expect(sourceColumns(data)).toEqual([1]);
    const kept = keepColumns(data, [1]);
    expect(kept.columns).toEqual([cols[1]]);
    expect(kept.bands[0].rows[0].cells.map((c) => c.sources)).toEqual([1]);
    expect(kept.first_source?.column).toBe(0);
    // None holds one: all kept.
    expect(sourceColumns({ ...data, bands: [{ direction: 'forward', rows: [{ ...r0, cells: [cell({}), cell({}), cell({})] }] }] } as unknown as DivergenceMapData)).toEqual([0, 1, 2]);
  });
});

describe('the cells as pixels', () => {
  const MARK = [17, 17, 17] as const;
  /** The RGBA of pixel (x, y) of a raster. */
  const px = (r: { rgba: Uint8ClampedArray; columns: number }, x: number, y: number) => Array.from(r.rgba.subarray((y * r.columns + x) * 4, (y * r.columns + x) * 4 + 4));
  const rgb = (css: string) => css.match(/\d+/g)!.map(Number);

  it('has the palette as numbers, the same colours as the CSS one', () => {
    expect(PALETTE_RGB).toHaveLength(PALETTE.length);
    PALETTE_RGB.forEach((c, k) => expect(cssRgb(c)).toBe(PALETTE[k]));
    expect(scaleRgb(0.5)).toEqual([250, 214, 160]);
    expect(cssRgb(PALETTE_RGB[UNCOMPARED_BUCKET])).toBe(UNCOMPARED);
    expect(cssRgb(PALETTE_RGB[NON_FINITE_BUCKET])).toBe(NON_FINITE);
  });

  it('gives a line three rows of pixels: each cell\'s colour, a peer\'s pale overlay, a source\'s bar; blanks and bands transparent', () => {
    const cells = [
      cell({ ratio: 1e-5 }),
      cell({ held: false, ratio: null }),
      cell({ ratio: 'NaN', sources: 1, source: 'Functional.linear.3.forward' }),
      cell({ ratio: null, from_rank: 0 }),
    ];
    const lines: MapLine[] = [
      { kind: 'band', direction: 'forward' },
      { kind: 'row', direction: 'forward', row: row('layers.0', 2, cells), key: 'k0', indent: 0, open: false },
      // A row shorter than the columns (a deeper map's, say): the missing cells are blank.
      { kind: 'row', direction: 'forward', row: row('layers.1', 2, [cell({ ratio: 1 })]), key: 'k1', indent: 0, open: false },
    ];
    const r = rasterLines(lines, 4, 0, 10, MARK);
    expect(r.columns).toBe(4);
    expect(r.lines).toBe(3);
    expect(r.rgba).toHaveLength(4 * 3 * RASTER_ROWS * 4);
    // The band: nothing.
    for (let y = 0; y < RASTER_ROWS; y++) for (let x = 0; x < 4; x++) expect(px(r, x, y)[3]).toBe(0);
    const y = RASTER_ROWS; // layers.0's colour row
    expect(px(r, 0, y)).toEqual([...rgb(cellColor(cells[0])), 255]);
    expect(px(r, 1, y)).toEqual([0, 0, 0, 0]);
    expect(px(r, 2, y)).toEqual([...rgb(NON_FINITE), 255]);
    expect(px(r, 3, y)).toEqual([...rgb(UNCOMPARED), 255]);
    // The peer's overlay: only where the error came from a peer rank.
    expect([0, 1, 2].map((x) => px(r, x, y + 1)[3])).toEqual([0, 0, 0]);
    expect(px(r, 3, y + 1)).toEqual([255, 255, 255, PEER_ALPHA]);
    // The source's bar, in the mark's colour.
    expect([0, 1, 3].map((x) => px(r, x, y + 2)[3])).toEqual([0, 0, 0]);
    expect(px(r, 2, y + 2)).toEqual([...MARK, 255]);
    expect(Array.from(r.peers)).toEqual([0, 1, 0]);
    expect(Array.from(r.sources)).toEqual([0, 1, 0]);
    expect(px(r, 0, 2 * RASTER_ROWS)).toEqual([...rgb(cellColor({ ratio: 1 })), 255]);
    expect(px(r, 1, 2 * RASTER_ROWS)[3]).toBe(0);
    // Held cells in view: the colour row's opaque pixels.
    expect(heldCells(r, 0, 3, 0, 4)).toBe(4);
    expect(heldCells(r, 1, 2, 1, 3)).toBe(1);
    expect(heldCells(r, 2, 3, 0, 4)).toBe(1);
    expect(heldCells(r, 0, 99, -5, 99)).toBe(4);
  });

  it('makes the lines asked for (a chunk), numbered from its first', () => {
    const lines: MapLine[] = Array.from({ length: 5 }, (_, i) => ({ kind: 'row', direction: 'forward', row: row(`layers.${i}`, 2, [cell({ ratio: 10 ** (i - 2), sources: i === 3 ? 1 : 0 })]), key: `k${i}`, indent: 0, open: false }));
    const r = rasterLines(lines, 1, 2, 4, MARK);
    expect(r.lines).toBe(2);
    expect(px(r, 0, 0)).toEqual([...rgb(cellColor({ ratio: 1 })), 255]);
    expect(px(r, 0, RASTER_ROWS)).toEqual([...rgb(cellColor({ ratio: 10 })), 255]);
    expect(Array.from(r.sources)).toEqual([0, 1]);
    // Past the end: what there is.
    expect(rasterLines(lines, 1, 4, 64, MARK).lines).toBe(1);
    expect(rasterLines(lines, 1, 9, 64, MARK).lines).toBe(0);
  });
});
