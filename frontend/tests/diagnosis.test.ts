import { afterEach, describe, expect, it, vi } from 'vitest';
import { setTransport } from '../src/api';
import { buildColorTable, WHITE } from '../src/colors';
import type { PageCtx } from '../src/ctx';
import { attachmentName, csvAddress, DIAGNOSIS_COLORS, diagnosisFill, errText, groupSummary, modulePath, openNodeAt, ordinal, reasonText, sourcesInside, spansText, splitKey, tolerancesText, verdictOf, viewFor, WORDED_REASON_KINDS, type DiagnosisGroup, type DiagnosisReasonPart } from '../src/diagnosis';
import { setLang, t, type Key } from '../src/i18n';
import { badgeText, badgeWidth } from '../src/render';
import { Scene } from '../src/scene';
// The engine's reason kinds (graph_ascend_diagnose::ReasonPart), read as text.
import reasonRs from '../../plugin/diagnose/src/reason.rs?raw';
import { DiagnosisPanel } from '../src/panels/diagnosis';
import { Store } from '../src/store';

const table = buildColorTable({
  '#FFFCF3': { value: [0, 0.3], accuracy_level: 'pass' },
  '#C7C7C7': { value: [], accuracy_level: 'unmatched node' },
});
const verdicts = { source: new Set(['Functional.layer_norm.3.forward']), inherited: new Set(['Module.layers.1.mlp.MLP.forward.0']) };
const matched = { matchedNodeLink: ['x'] };

describe('the colour mode "where the error is introduced"', () => {
  it('paints matched target boxes by their verdict', () => {
    expect(verdictOf(verdicts, 'Functional.layer_norm.3.forward')).toBe('source');
    expect(diagnosisFill(verdicts, 'Functional.layer_norm.3.forward', matched, 'NPU', table)).toBe(DIAGNOSIS_COLORS.source);
    expect(diagnosisFill(verdicts, 'Module.layers.1.mlp.MLP.forward.0', matched, 'NPU', table)).toBe(DIAGNOSIS_COLORS.inherited);
    expect(diagnosisFill(verdicts, 'Module.layers.0.MLP.forward.0', matched, 'NPU', table)).toBe(DIAGNOSIS_COLORS.fine);
  });
  it('keeps unmatched boxes grey, the golden side white, and says nothing without verdicts', () => {
    expect(diagnosisFill(verdicts, 'a', { matchedNodeLink: [] }, 'NPU', table)).toBe('#C7C7C7');
    expect(diagnosisFill(verdicts, 'Functional.layer_norm.3.forward', matched, 'Bench', table)).toBe(WHITE);
    expect(diagnosisFill(null, 'Functional.layer_norm.3.forward', matched, 'NPU', table)).toBe(WHITE);
    // Four verdicts, four colours: source, from a peer rank, inherited from upstream, fine.
    const colours = new Set(Object.values(DIAGNOSIS_COLORS));
    expect(colours.size).toBe(4);
  });
  it('says a node whose error came from a peer rank apart from one inherited from upstream', () => {
    const view = { source: new Set<string>(), inherited: new Set(['recv', 'after']), peer: new Set(['recv']) };
    expect(diagnosisFill(view, 'recv', matched, 'NPU', table)).toBe(DIAGNOSIS_COLORS.peer);
    expect(diagnosisFill(view, 'after', matched, 'NPU', table)).toBe(DIAGNOSIS_COLORS.inherited);
  });
});

describe('diagnosis helpers', () => {
  it('switches view only for a source of another step or rank', () => {
    expect(viewFor({ step: 0, rank: 1 }, { step: 0, rank: 1 })).toBeNull();
    expect(viewFor({ step: 2, rank: 1 }, { step: 0, rank: 1 })).toEqual({ step: 2, rank: 1 });
  });
  it('builds the CSV address of the shown step and rank', () => {
    const url = csvAddress({ run: 'r 1', tag: 'compare_1', lang: 'zh', step: 0, rank: 3 });
    expect(url.startsWith('exportCsv?')).toBe(true);
    const q = new URLSearchParams(url.slice('exportCsv?'.length));
    expect([q.get('run'), q.get('tag'), q.get('lang'), q.get('step'), q.get('rank')]).toEqual(['r 1', 'compare_1', 'zh', '0', '3']);
  });
  it('reads the download name, UTF-8 name first', () => {
    expect(attachmentName(`attachment; filename="a_.csv"; filename*=UTF-8''a%E6%AF%94.csv`, 'x.csv')).toBe('a比.csv');
    expect(attachmentName('attachment; filename="plain.csv"', 'x.csv')).toBe('plain.csv');
    expect(attachmentName(null, 'x.csv')).toBe('x.csv');
  });
});

/** A part as the sidecar sends it: values a kind does not have are empty or absent. */
function part(kind: string, values: Partial<DiagnosisReasonPart> = {}): DiagnosisReasonPart {
  return { kind, name: '', entry: '', metric: '', target: '', golden: '', ...values };
}

describe('reasons in the page\'s language', () => {
  afterEach(() => setLang('en'));
  const eps = [
    part('argument_differs', { name: 'eps', target: '0.1', golden: '1e-05' }),
    part('inputs_equal'),
    part('output_differs', { entry: 'output.0', metric: 'Norm', err: 0.031 }),
  ];
  const amplified = [
    part('inputs_differ', { entry: 'input.0', metric: 'Cosine', err: 0.0042 }),
    part('output_non_finite', { entry: 'output.0', metric: 'NonFinite', err: 'Infinity' }),
    part('worse_than_inputs', { score: 40.4 }),
  ];

  it('words the parts in English as the sidecar does', () => {
    setLang('en');
    // The sentences graph_ascend_diagnose::reason renders for the same parts.
    expect(reasonText('ignored', eps)).toBe('argument eps differs: 0.1 vs golden 1e-05; inputs are equal; output.0 Norm differs by 3.1%');
    expect(reasonText('ignored', amplified)).toBe('inputs differ by 4.2e-3 (Cosine distance of input.0); output.0 has inf/NaN where golden has none; 40x worse than its inputs');
    expect(reasonText('ignored', [part('inputs_finite'), part('holds_non_finite')])).toBe('inputs are finite; an output holds inf/NaN');
  });

  it('words the same parts in Chinese', () => {
    setLang('zh');
    const zh = reasonText('argument eps differs', eps);
    expect(zh).toBe('入参 eps 不一致：0.1，标杆为 1e-05；输入完全一致；output.0 的 Norm 相差 3.1%');
    expect(zh).not.toMatch(/differs|inputs|golden/);
    expect(reasonText('x', amplified)).toBe('输入相差 4.2e-3（input.0 的 余弦距离）；output.0 出现 inf/NaN，标杆没有；比输入差 40 倍');
    expect(reasonText('x', [part('inputs_agree', { err: 1e-6 }), part('parameter_differs', { name: 'weight', metric: 'Max', err: 0.5 })])).toBe('输入一致（误差 1.0e-6）；权重 weight 不一致（Max 相差 50.0%）');
  });

  it('keeps the English sentence when there are no parts or one of an unknown kind', () => {
    setLang('zh');
    expect(reasonText('inputs agree', undefined)).toBe('inputs agree');
    expect(reasonText('inputs agree', [])).toBe('inputs agree');
    expect(reasonText('newer', [part('inputs_equal'), part('a_kind_of_tomorrow')])).toBe('newer');
  });

  it('fills values in one pass: braces in a value stay as they are', () => {
    setLang('en');
    expect(reasonText('x', [part('argument_differs', { name: 'p', target: '{golden}', golden: '0.5' })])).toBe('argument p differs: {golden} vs golden 0.5');
  });

  it('words a weight that holds inf/NaN as a cause, as the sidecar does', () => {
    setLang('en');
    const overflow = [
      part('parameter_non_finite', { name: 'weight', metric: 'Norm', target: 'inf' }),
      part('inputs_finite'),
      part('holds_non_finite', { entry: 'output.0' }),
    ];
    // graph_ascend_diagnose::reason's sentence for the same parts.
    expect(reasonText('x', overflow)).toBe("weight's Norm overflows to inf; inputs are finite; output.0 holds inf/NaN");
    expect(reasonText('x', [part('parameter_non_finite', { name: 'weight', metric: 'Max', golden: '-inf' })])).toBe("golden's weight's Max overflows to -inf");
    expect(reasonText('x', [part('parameter_non_finite', { name: 'bias', metric: 'Mean', target: 'NaN' })])).toBe("bias's Mean is NaN");
    setLang('zh');
    expect(reasonText('x', overflow)).toBe('权重 weight 的 Norm 溢出为 inf；输入均为有限值；output.0 中出现 inf/NaN');
    expect(reasonText('x', [part('parameter_non_finite', { name: 'weight', metric: 'Max', golden: '-inf' })])).toBe('标杆侧权重 weight 的 Max 溢出为 -inf');
    expect(reasonText('x', [part('parameter_non_finite', { name: 'bias', metric: 'Mean', target: 'NaN' })])).toBe('权重 bias 的 Mean 为 NaN');
  });

  it('has words in both languages for every kind of reason the engine writes', () => {
    // The kinds as graph_ascend_diagnose::ReasonPart::kind names them (an exhaustive match, so a
    // new kind is listed there): each must be worded here, in English and in Chinese.
    const rust: string = reasonRs;
    const body = rust.slice(rust.indexOf('pub fn kind(&self)'), rust.indexOf('pub fn values(&self)'));
    const kinds = [...body.matchAll(/=> "([a-z0-9_]+)"/g)].map((m) => m[1]);
    expect(kinds.length).toBeGreaterThanOrEqual(16);
    for (const kind of kinds) {
      expect(WORDED_REASON_KINDS, kind).toContain(kind);
      for (const lang of ['en', 'zh'] as const) {
        setLang(lang);
        const key = `diag.reason.${kind}` as Key;
        expect(t(key), `${lang} ${key}`).not.toBe(key);
        // Worded from its parts, not the English fallback.
        expect(reasonText('FALLBACK', [part(kind, { name: 'w', entry: 'output.0', metric: 'Norm', err: 0.5, target: 'inf', score: 2 })]), `${lang} ${kind}`).not.toBe('FALLBACK');
      }
    }
  });

  it('writes errors as the sidecar does', () => {
    expect([errText(0), errText('Infinity'), errText(0.031), errText(1e-6), errText(0.0042), errText(null)]).toEqual(['0', 'inf', '3.1%', '1.0e-6', '4.2e-3', 'inf']);
  });
});

const ANSWER = {
  success: true,
  data: {
    mode: 'statistics',
    step: 0,
    ranks: [0],
    origin_rank: 0,
    first_non_finite: [],
    sources: [
      { step: 0, rank: 0, node: 'Functional.layer_norm.3.forward', golden_node: 'Functional.layer_norm.3.forward', direction: 'forward', kind: 'cause', score: 12, reason: 'argument eps differs: 0.1 vs golden 1e-05', enclosing: [] },
    ],
    total_sources: 1,
    nodes_judged: 10,
  },
  states: { step: 0, rank: 0, source: ['Functional.layer_norm.3.forward'], inherited: ['Module.layers.2.MLP.forward.0'] },
};

function fakeCtx(store: Store) {
  const calls: string[] = [];
  const ctx = {
    store,
    panes: {},
    toast: vi.fn(),
    recolor: vi.fn(),
    changeView: vi.fn(async (patch: { step?: number; rank?: number }) => {
      calls.push(`view ${JSON.stringify(patch)}`);
      Object.assign(store.meta, patch);
    }),
    jumpTo: vi.fn(async (side: string, name: string) => {
      calls.push(`jump ${side} ${name}`);
    }),
    openNodeAt: (at: { step: number; rank: number; node: string; microStep?: number }) => openNodeAt(ctx as unknown as PageCtx, at),
  };
  return { ctx: ctx as unknown as PageCtx, calls, raw: ctx };
}

function compareStore(): Store {
  const store = new Store();
  store.meta = { ...store.meta, run: 'run', tag: 'compare', step: 0, rank: 0 };
  store.config = { microSteps: 0, overflowCheck: false, isSingleGraph: false, colors: {}, matchedConfigFiles: [], task: 'summary', ranks: [0, 1], steps: [0] };
  return store;
}

describe('the Diagnosis panel', () => {
  afterEach(() => setTransport((route, init) => fetch(route, init)));

  it('fetches the diagnosis once per file, and the verdicts once per view in the colour mode', async () => {
    const routes: string[] = [];
    setTransport(async (route) => {
      routes.push(route);
      // As the server: verdicts only when asked for.
      const body = route.includes('states=true') ? ANSWER : { ...ANSWER, states: undefined };
      return new Response(JSON.stringify(body), { status: 200, headers: { 'Content-Type': 'application/json' } });
    });
    const store = compareStore();
    const { ctx, raw } = fakeCtx(store);
    const panel = new DiagnosisPanel(ctx);
    await panel.ensure();
    expect(routes).toHaveLength(1);
    expect(routes[0]).toMatch(/^diagnosis\?/);
    expect(routes[0]).not.toContain('states=');
    await panel.ensure();
    expect(routes).toHaveLength(1);
    // The colour mode needs the verdicts of the view.
    store.mode = 'diagnosis';
    await panel.ensure(true);
    expect(routes).toHaveLength(2);
    expect(routes[1]).toContain('states=true');
    expect(store.diagnosis?.source.has('Functional.layer_norm.3.forward')).toBe(true);
    expect(store.diagnosis?.inherited.has('Module.layers.2.MLP.forward.0')).toBe(true);
    expect(raw.recolor).toHaveBeenCalled();
    // Another rank is another view.
    store.meta.rank = 1;
    await panel.ensure(true);
    expect(routes).toHaveLength(3);
    expect(routes[2]).toContain('rank=1');
  });

  it('asks the least when the page asks twice at once: the list once, then the verdicts once', async () => {
    // The transport answers a request only when the test says so, as a slow sidecar would.
    const routes: string[] = [];
    const held: (() => void)[] = [];
    setTransport((route) => {
      routes.push(route);
      const body = route.includes('states=true') ? ANSWER : { ...ANSWER, states: undefined };
      return new Promise((resolve) => held.push(() => resolve(new Response(JSON.stringify(body), { status: 200, headers: { 'Content-Type': 'application/json' } }))));
    });
    const answerNext = async (asked: number) => {
      await vi.waitFor(() => expect(routes).toHaveLength(asked));
      held.shift()?.();
    };

    // A link with the colour mode "where the error is introduced" and the panel: the graph's roots
    // drawn (app `loadRoots`) and the panel opened (app `openTab`) both ask for the verdicts.
    const store = compareStore();
    store.mode = 'diagnosis';
    store.tab = 'diagnosis';
    const panel = new DiagnosisPanel(fakeCtx(store).ctx);
    const both = Promise.all([panel.ensure(true), panel.ensure(true)]);
    await answerNext(1);
    expect(routes[0]).not.toContain('states=');
    // The list is drawn before the verdicts are asked for.
    await vi.waitFor(() => expect(store.diagnosis?.data.total_sources).toBe(1));
    expect(store.diagnosis?.statesKey).toBe('');
    await answerNext(2);
    expect(routes[1]).toContain('states=true');
    await both;
    expect(routes).toHaveLength(2);
    expect(store.diagnosis?.source.has('Functional.layer_norm.3.forward')).toBe(true);

    // A link naming the panel only: the roots drawn and the panel opened ask for the list, once.
    routes.length = 0;
    const listOnly = compareStore();
    listOnly.tab = 'diagnosis';
    const listPanel = new DiagnosisPanel(fakeCtx(listOnly).ctx);
    const twice = Promise.all([listPanel.ensure(false), listPanel.ensure(false)]);
    await answerNext(1);
    await twice;
    expect(routes).toHaveLength(1);
    expect(routes[0]).not.toContain('states=');
  });

  it('shows the server\'s error and asks nothing of a build file', async () => {
    setTransport(async () => new Response(JSON.stringify({ success: false, error: 'Diagnosis failed: x: not a compare file' }), { status: 200 }));
    const store = compareStore();
    const { ctx, raw } = fakeCtx(store);
    const panel = new DiagnosisPanel(ctx);
    await panel.ensure();
    expect(store.diagnosisError).toContain('not a compare file');
    expect(raw.toast).toHaveBeenCalledWith(expect.stringContaining('not a compare file'), 'error');
    expect(store.diagnosis).toBeNull();

    let asked = 0;
    setTransport(async () => {
      asked++;
      return new Response('{}');
    });
    const single = compareStore();
    single.config = { ...single.config!, isSingleGraph: true };
    await new DiagnosisPanel(fakeCtx(single).ctx).ensure();
    expect(asked).toBe(0);
  });

  it('asks no diagnosis of a structure-only compare (it has no data)', async () => {
    let asked = 0;
    setTransport(async () => {
      asked++;
      return new Response('{}');
    });
    const store = compareStore();
    store.config = { ...store.config!, task: 'structure', colors: { '#C7C7C7': { value: [], accuracy_level: 'unmatched node' } } };
    expect(store.structureOnly).toBe(true);
    const panel = new DiagnosisPanel(fakeCtx(store).ctx);
    await panel.ensure(true);
    expect(asked).toBe(0);
    expect(compareStore().structureOnly).toBe(false);
  });

  it('asks again with a reference picked, and says which tolerances were used', async () => {
    const routes: string[] = [];
    const learned = { source: 'reference', reference: 'ref.vis.db', kinds: [{ op: 'Functional.linear', direction: 'forward', dtype: 'b_float16', samples: 17, noise: 0.0035, jump: 0.007 }] };
    setTransport(async (route) => {
      routes.push(route);
      const tolerances = route.includes('reference_tag=') ? learned : { source: 'tightened', reference: '', kinds: [] };
      return new Response(JSON.stringify({ ...ANSWER, states: undefined, data: { ...ANSWER.data, tolerances } }), { status: 200, headers: { 'Content-Type': 'application/json' } });
    });
    const store = compareStore();
    const panel = new DiagnosisPanel(fakeCtx(store).ctx);
    await panel.ensure();
    expect(routes[0]).not.toContain('reference_');
    expect(tolerancesText(store.diagnosis?.data.tolerances)).toBe(t('diag.tol.tightened', { count: 0 }));
    await panel.setReference('run|ref');
    expect(routes).toHaveLength(2);
    expect(routes[1]).toContain('reference_run=run');
    expect(routes[1]).toContain('reference_tag=ref');
    expect(tolerancesText(store.diagnosis?.data.tolerances)).toBe(t('diag.tol.reference', { file: 'ref.vis.db', count: 1 }));
    // The same file and reference: nothing asked again; no reference: asked again without.
    await panel.ensure();
    expect(routes).toHaveLength(2);
    await panel.setReference('');
    expect(routes).toHaveLength(3);
    expect(routes[2]).not.toContain('reference_');
    expect(tolerancesText(undefined)).toBe(t('diag.tol.table'));
    expect(splitKey('a|b|c.vis')).toEqual(['a|b', 'c.vis']);
  });

  it('jumps to a source, switching step and rank first when it lives elsewhere', async () => {
    const store = compareStore();
    const { ctx, calls } = fakeCtx(store);
    const panel = new DiagnosisPanel(ctx);
    await panel.jump({ step: 0, rank: 0, node: 'Functional.layer_norm.3.forward' });
    expect(calls).toEqual(['jump NPU Functional.layer_norm.3.forward']);
    calls.length = 0;
    await panel.jump({ step: 0, rank: 1, node: 'Functional.linear.10.forward' });
    expect(calls).toEqual(['view {"step":0,"rank":1}', 'jump NPU Functional.linear.10.forward']);
    // A map's cell of another micro-batch than the one shown: every micro-batch first.
    calls.length = 0;
    store.meta.microStep = 1;
    await openNodeAt(ctx, { step: 0, rank: 1, node: 'Module.layers.0.Block.forward.2', microStep: 2 });
    expect(calls).toEqual(['view {"microStep":-1}', 'jump NPU Module.layers.0.Block.forward.2']);
  });
});

/** A fault as the sidecar sends it. */
function fault(values: Partial<DiagnosisGroup>): DiagnosisGroup {
  return {
    summary: '', kind: 'cause', module: 'Module.layers.2.mlp.fc1.Linear.forward', api: 'Functional.linear', call: 1, direction: 'forward',
    step: 3, rank: 0, micro_step: 0, node: 'Functional.linear.10.forward', reason: '', reason_parts: [part('parameter_differs', { name: 'weight', metric: 'Norm', err: 0.1 })],
    occurrences: 16, micro_steps: [0, 1, 2, 3, 4, 5, 6, 7], ranks: [0, 1], steps: [3, 5], others: [], ...values,
  };
}

describe('a fault in one line', () => {
  afterEach(() => setLang('en'));
  it('reads as the sidecar writes it (graph_ascend_diagnose::group)', () => {
    setLang('en');
    expect(groupSummary(fault({}))).toBe('`Functional.linear` (2nd call) in `layers.2.mlp.fc1` — weight differs — 8 micro-batches, ranks 0–1, from step 3');
    expect(groupSummary(fault({ api: 'Functional.layer_norm', call: 0, module: 'Module.layers.1.ln2.LayerNorm.forward', micro_steps: [0], ranks: [0, 0], steps: [0, 0],
      reason_parts: [part('argument_differs', { name: 'eps', target: '0.1', golden: '1e-05' }), part('inputs_equal')] })))
      .toBe('`Functional.layer_norm` (1st call) in `layers.1.ln2` — eps differs — rank 0, step 0');
    expect(groupSummary(fault({ api: '', call: 0, module: 'Module.layers.3.Block.backward', kind: 'introduced', reason_parts: [], micro_steps: [2], ranks: [0, 3, 5, 5], steps: [1, 1] })))
      .toBe('`layers.3` — error introduced here — ranks 0–3, 5, step 1');
    expect(groupSummary(fault({ kind: 'amplified', micro_steps: [], ranks: [7, 7], steps: [0, 0] }))).toBe('`Functional.linear` (2nd call) in `layers.2.mlp.fc1` — error amplified here — rank 7, step 0');
  });
  it('reads in Chinese on the zh page', () => {
    setLang('zh');
    const zh = groupSummary(fault({}));
    expect(zh).toBe('`Functional.linear`（第 2 次调用），位于 `layers.2.mlp.fc1` — weight 不一致 — 8 个 micro-batch，rank 0–1，自 step 3 起');
    expect(zh).not.toMatch(/differs|call\)|from step/);
  });
  it('writes ordinals, ranges and module paths as people do', () => {
    expect([1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 101, 111].map(ordinal)).toEqual(['1st', '2nd', '3rd', '4th', '11th', '12th', '13th', '21st', '22nd', '23rd', '101st', '111th']);
    expect(spansText([0, 1023, 1030, 1030])).toBe('0–1023, 1030');
    expect(modulePath('Module.layers.2.mlp.fc1.Linear.forward')).toBe('layers.2.mlp.fc1');
    expect(modulePath('Cell.layers.1.ln2.LayerNorm.backward')).toBe('layers.1.ln2');
    expect(modulePath('Module.head')).toBe('head');
  });
});

describe('modules holding sources are marked', () => {
  const view = { inside: new Map([['Module.layers.2.Block.forward.0', 1], ['DefaultModel', 120]]) };
  it('on the target side, by the count of sources inside', () => {
    expect(sourcesInside(view, 'Module.layers.2.Block.forward.0', 'NPU')).toBe(1);
    expect(sourcesInside(view, 'Module.layers.1.Block.forward.0', 'NPU')).toBe(0);
    expect(sourcesInside(view, 'Module.layers.2.Block.forward.0', 'Bench')).toBe(0);
    expect(sourcesInside(null, 'Module.layers.2.Block.forward.0', 'NPU')).toBe(0);
  });
  it('keeps the count on the box, recoloured with the mode', () => {
    const node = (name: string) => ({ name, label: name, x: 0, y: 0, width: 100, height: 15, nodeType: 0, matchedNodeLink: ['x'] }) as never;
    const sc = new Scene({ a: node('Module.layers.2.Block.forward.0'), b: node('Module.layers.1.Block.forward.0') }, () => '#fff', (n) => sourcesInside(view, n.name, 'NPU'));
    expect(sc.byKey.get('a')?.mark).toBe(1);
    expect(sc.byKey.get('b')?.mark).toBe(0);
    sc.recolor(() => '#fff');
    expect(sc.byKey.get('a')?.mark).toBe(0);
  });
  it('badges the count, "99+" beyond, with room for its digits', () => {
    expect([badgeText(1), badgeText(99), badgeText(120)]).toEqual(['1', '99', '99+']);
    expect(badgeWidth('99+')).toBeGreaterThan(badgeWidth('1'));
  });
});
