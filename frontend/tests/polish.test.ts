// Rough edges a new user hit: each one's pure logic, checked here (the page's behaviour is in
// tests/e2e/polish.test.mjs).
import { afterEach, describe, expect, it } from 'vitest';
import { convertedRun } from '../src/convert';
import { columnsOf, pairRows, scaleRelative, worstCells } from '../src/details';
import { kindLabel, reasonPieces, reasonText, reasonTip, type DiagnosisReasonPart } from '../src/diagnosis';
import { setLang, t } from '../src/i18n';
import type { DetailColumn, NodeDetail } from '../src/types';

describe('"Open this file" after a conversion', () => {
  const catalog = { 'converted/s1': { tags: ['compare_1'] }, s1: { tags: ['other'] }, logs: { tags: ['build_2'] } };
  it('opens the run named by the folder path below the logdir, not its last folder', () => {
    expect(convertedRun('converted/s1/compare_1.vis.db', catalog)).toEqual({ run: 'converted/s1', tag: 'compare_1' });
  });
  it('finds a file right in the logdir by its tag, and says when the run is not listed', () => {
    expect(convertedRun('build_2.vis.db', catalog)).toEqual({ run: 'logs', tag: 'build_2' });
    expect(convertedRun('elsewhere/x.vis.db', catalog)).toBeNull();
  });
});

describe('details table: relative errors measured as the diagnosis does', () => {
  const rules: DetailColumn[] = [
    ...['Max', 'Min', 'Mean'].map((name) => ({ name, worse: '', threshold: 0 })),
    { name: 'MeanRelativeErr', worse: 'higher', threshold: 1e-3 },
  ];
  // input.0: a LayerNorm-like output, mean near zero: 120 % "relative" error, 1e-9 of its scale.
  // input.1: a real difference of the mean, 10 % of its scale, 8 % relative.
  const npu: NodeDetail = {
    node_name: 'n',
    input_data: {
      'n.input.0': { Max: '3.1', Min: '-2.9', Mean: '2.2e-9', MeanRelativeErr: '120%' },
      'n.input.1': { Max: '2', Min: '0', Mean: '1.3', MeanRelativeErr: '8%' },
    },
  };
  const bench: NodeDetail = {
    node_name: 'n',
    input_data: {
      'n.input.0': { Max: '3.1', Min: '-2.9', Mean: '1e-9' },
      'n.input.1': { Max: '2', Min: '0', Mean: '1.1' },
    },
  };
  const rows = pairRows(npu, bench);
  it('paints the cell whose statistic differs against the tensor, not the largest percentage', () => {
    expect(worstCells(rows, columnsOf(rows, rules), rules).get('MeanRelativeErr')).toBe(2);
  });
  it('gives the measure the cell is painted by (its tooltip), on target rows paired with golden only', () => {
    const near = scaleRelative(rows, 0, 'MeanRelativeErr');
    expect(near?.stat).toBe('Mean');
    expect(near?.scale).toBeCloseTo(3.1);
    expect(near?.err).toBeCloseTo(1.2e-9 / 3.1, 15);
    expect(scaleRelative(rows, 1, 'MeanRelativeErr')).toBeUndefined();
    expect(scaleRelative(rows, 0, 'Mean')).toBeUndefined();
  });
  it('falls back to the cell itself when a statistic is missing', () => {
    const only: NodeDetail = { node_name: 'n', input_data: { 'n.input.0': { Mean: '1', MeanRelativeErr: '50%' } } };
    const r = pairRows(only, { node_name: 'n', input_data: { 'n.input.0': { Mean: '2' } } });
    expect(scaleRelative(r, 0, 'MeanRelativeErr')).toBeUndefined();
    expect(worstCells(r, columnsOf(r, rules), rules).get('MeanRelativeErr')).toBe(0);
  });
});

describe('diagnosis list wording', () => {
  afterEach(() => setLang('en'));
  const part = (kind: string, extra: Partial<DiagnosisReasonPart> = {}): DiagnosisReasonPart => ({ kind, name: 'weight', entry: '', metric: 'Norm', target: '', golden: '', err: 0.1, ...extra });
  it('says weight or argument, by what differs, in both languages', () => {
    for (const lang of ['en', 'zh'] as const) {
      setLang(lang);
      const weight = kindLabel({ kind: 'cause', reason_parts: [part('parameter_differs')] });
      const argument = kindLabel({ kind: 'cause', reason_parts: [part('argument_differs', { name: 'eps', target: '1e-5', golden: '1e-6' })] });
      const both = kindLabel({ kind: 'cause', reason_parts: [part('parameter_md5_differs'), part('argument_differs')] });
      expect(new Set([weight, argument, both]).size).toBe(3);
      expect(weight).toBe(t('diag.kind.causeWeight'));
      expect(argument).toBe(t('diag.kind.causeArgument'));
      expect(both).toBe(t('diag.kind.causeBoth'));
      expect(weight).not.toContain('/');
    }
    setLang('zh');
    expect(kindLabel({ kind: 'cause', reason_parts: [part('parameter_differs')] })).toBe('权重不一致');
    expect(kindLabel({ kind: 'cause', reason_parts: [part('argument_differs')] })).toBe('入参不一致');
  });
  it('gives the score a tooltip, and words a reason part by part as reasonText does', () => {
    const parts = [part('output_differs', { entry: 'output.0' }), part('worse_than_inputs', { score: 412 })];
    const pieces = reasonPieces('English', parts);
    expect(pieces.map((p) => p.kind)).toEqual(['output_differs', 'worse_than_inputs']);
    expect(pieces[1].text).toContain('412');
    expect(pieces.map((p) => p.text).join(t('diag.reason.join'))).toBe(reasonText('English', parts));
    expect(reasonTip('worse_than_inputs')).toBe(t('diag.scoreTip'));
    expect(reasonTip('output_differs')).toBe('');
  });
});
