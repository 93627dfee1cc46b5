/**
 * The diagnosis as the page reads it (the `diagnosis` route, docs/diagnosis.md): its answer's
 * shapes (generated from the proto), the colour rule of the mode "where the error is introduced"
 * (source / inherited / fine, and the mark of a module holding sources), and the pure helpers of
 * the Diagnosis panel (which view a source lives in, a fault's line in words, the CSV download's
 * address). Shared by the panel, the toolbar's legend and the app's box colours; no DOM here.
 */
import { SOURCE_RED, WHITE, type ColorTable } from './colors';
import type { Diagnosis, DiagnosisGroup, DiagnosisReasonPart, DiagnosisSource, DiagnosisTolerances } from './generated/proto';
import { t, type Key } from './i18n';
import type { PageCtx } from './ctx';
import type { MetaData, RenderNode } from './types';

export type { Diagnosis, DiagnosisGroup, DiagnosisNonFinite, DiagnosisOccurrence, DiagnosisReasonPart, DiagnosisSource, DiagnosisStates } from './generated/proto';

export type SourceKind = 'cause' | 'introduced' | 'amplified';

/** What the page keeps: the file's diagnosis, and the verdicts of the view they were asked for. */
export interface DiagnosisView {
  /** `run|tag` of the file. */
  file: string;
  data: Diagnosis;
  /** metaKey of the view the states are for. */
  statesKey: string;
  source: Set<string>;
  inherited: Set<string>;
  /** Nodes of the view whose error came from a peer rank (the diagnosis's `peer_inheritance`). */
  peer?: Set<string>;
  /** Modules with sources inside them (at any depth) → how many. */
  inside: Map<string, number>;
}

export const DIAGNOSIS_COLORS = {
  source: SOURCE_RED,
  peer: 'rgb(212,196,240)',
  inherited: 'rgb(250,214,160)',
  fine: 'rgb(226,241,226)',
} as const;

export type Verdict = keyof typeof DIAGNOSIS_COLORS;

export function verdictOf(view: Pick<DiagnosisView, 'source' | 'inherited' | 'peer'>, key: string): Verdict {
  if (view.source.has(key)) return 'source';
  if (view.peer?.has(key)) return 'peer';
  if (view.inherited.has(key)) return 'inherited';
  return 'fine';
}

/**
 * A box's fill in the mode "where the error is introduced": the target side's matched nodes by
 * their verdict; unmatched nodes as in msprobe's mode; the golden side white. Without verdicts for
 * the view (still loading, or none), every box is white rather than falsely "fine".
 */
export function diagnosisFill(
  view: Pick<DiagnosisView, 'source' | 'inherited' | 'peer'> | null,
  key: string,
  node: Pick<RenderNode, 'matchedNodeLink'>,
  side: 'NPU' | 'Bench' | 'Single',
  table: ColorTable,
): string {
  if (side !== 'NPU') return WHITE;
  if (!node.matchedNodeLink || node.matchedNodeLink.length === 0) return table.unmatched;
  if (!view) return WHITE;
  return DIAGNOSIS_COLORS[verdictOf(view, key)];
}

/**
 * How many sources a target box holds inside it (0: none, or not marked): in the mode "where the
 * error is introduced" such a module is outlined and badged with the count, even when its own
 * output agrees, so the top level shows where to dig.
 */
export function sourcesInside(view: Pick<DiagnosisView, 'inside'> | null, key: string, side: 'NPU' | 'Bench' | 'Single'): number {
  if (side !== 'NPU' || !view) return 0;
  return view.inside.get(key) ?? 0;
}

export function fileKey(m: Pick<MetaData, 'run' | 'tag'>): string {
  return `${m.run}|${m.tag}`;
}

/** `run|tag` back to its run and tag (a tag holds no `|` of its own: split at the last one). */
export function splitKey(key: string): [string, string] {
  const i = key.lastIndexOf('|');
  return i < 0 ? [key, ''] : [key.slice(0, i), key.slice(i + 1)];
}

/** Which tolerances a diagnosis used, in words (an answer without them: the fixed table). */
export function tolerancesText(tol: Pick<DiagnosisTolerances, 'source' | 'reference' | 'kinds'> | undefined): string {
  const count = tol?.kinds.length ?? 0;
  if (tol?.source === 'reference') return t('diag.tol.reference', { file: tol.reference, count });
  if (tol?.source === 'tightened') return t('diag.tol.tightened', { count });
  return t('diag.tol.table');
}

/** The step and rank to switch to before a source can be shown (null: it is in the view). */
export function viewFor(source: Pick<DiagnosisSource, 'step' | 'rank'>, m: Pick<MetaData, 'step' | 'rank'>): { step: number; rank: number } | null {
  return source.step === m.step && source.rank === m.rank ? null : { step: source.step, rank: source.rank };
}

/**
 * Show a node of another step and rank (a diagnosis's source, a map's cell): that step and rank
 * first (and every micro-batch, when one other than `microStep` is shown), then the node expanded
 * to, selected and centred on the target side. `PageCtx.openNodeAt` is this.
 */
export async function openNodeAt(
  ctx: Pick<PageCtx, 'store' | 'changeView' | 'jumpTo'>,
  at: { step: number; rank: number; node: string; microStep?: number },
): Promise<void> {
  const m = ctx.store.meta;
  const patch: Partial<Pick<MetaData, 'step' | 'rank' | 'microStep'>> = { ...viewFor(at, m) };
  if (at.microStep !== undefined && m.microStep !== -1 && m.microStep !== at.microStep) patch.microStep = -1;
  if (Object.keys(patch).length) await ctx.changeView(patch);
  await ctx.jumpTo('NPU', at.node);
}

/** The relative address of the CSV of the shown step and rank (`exportCsv`, rendered by the sidecar). */
export function csvAddress(m: Pick<MetaData, 'run' | 'tag' | 'lang' | 'step' | 'rank'>): string {
  const q = new URLSearchParams({ run: m.run, tag: m.tag, lang: m.lang, step: String(m.step), rank: String(m.rank) });
  return `exportCsv?${q.toString()}`;
}

/** A size as people read it: "512 B", "48 kB", "117.3 MB". */
export function sizeText(bytes: number): string {
  if (bytes < 1000) return `${bytes} B`;
  if (bytes < 1e6) return `${Math.round(bytes / 1000)} kB`;
  return `${(bytes / 1e6).toFixed(1)} MB`;
}

/**
 * A download's body read chunk by chunk, `progress` told the bytes received after each (a large
 * CSV takes seconds: the page shows them coming), as one Blob of `type` at the end. A body that breaks
 * off (the plugin aborts the answer when the sidecar stops sending: docs/shim.md, "Downloads") throws an
 * error that says so, and nothing is returned to be saved.
 */
export async function readWithProgress(body: ReadableStream<Uint8Array> | null, type: string, progress: (bytes: number) => void): Promise<Blob> {
  const parts: Uint8Array[] = [];
  let bytes = 0;
  if (body) {
    const reader = body.getReader();
    for (;;) {
      let next: ReadableStreamReadResult<Uint8Array>;
      try {
        next = await reader.read();
      } catch (e) {
        throw new Error(t('download.brokeOff', { size: sizeText(bytes) }), { cause: e });
      }
      if (next.done) break;
      parts.push(next.value);
      bytes += next.value.byteLength;
      progress(bytes);
    }
  }
  return new Blob(parts as BlobPart[], { type });
}

/** The file name of a download from its Content-Disposition (RFC 5987 name first). */
export function attachmentName(disposition: string | null, fallback: string): string {
  if (!disposition) return fallback;
  const star = /filename\*\s*=\s*UTF-8''([^;]+)/i.exec(disposition);
  if (star) {
    try {
      return decodeURIComponent(star[1].trim());
    } catch {
      /* fall through to the plain name */
    }
  }
  const plain = /filename\s*=\s*"([^"]*)"/i.exec(disposition) ?? /filename\s*=\s*([^;]+)/i.exec(disposition);
  return plain ? plain[1].trim() : fallback;
}

/** The reason kinds the page can word, each with its template in i18n.ts. */
const REASON_KINDS = [
  'parameter_differs',
  'parameter_md5_differs',
  'argument_differs',
  'inputs_equal',
  'inputs_equal_md5',
  'inputs_agree',
  'inputs_differ',
  'inputs_differ_md5',
  'inputs_already_differ',
  'output_differs',
  'output_md5_differs',
  'output_non_finite',
  'worse_than_inputs',
  'inputs_finite',
  'holds_non_finite',
  'parameter_non_finite',
  'output_changed_after_call',
  'gradient_changed_after_call',
  'output_changed_before_call',
  'gradient_changed_before_call',
  'kernel_backward',
] as const;

/** The reason kinds the page words (each has `diag.reason.<kind>` in both languages). */
export const WORDED_REASON_KINDS: readonly string[] = REASON_KINDS;

function asNumber(v: number | string | null | undefined): number {
  return typeof v === 'number' ? v : v === null || v === undefined ? NaN : Number(v);
}

/** A relative error as the sidecar writes it (graph_ascend_diagnose::reason::err_text): "3.1%", "1.0e-6", "0", "inf". */
export function errText(err: number | string | null | undefined): string {
  const v = asNumber(err);
  if (v === 0) return '0';
  if (!Number.isFinite(v)) return 'inf';
  if (v >= 1e-2) return `${(v * 100).toFixed(1)}%`;
  return v.toExponential(1).replace('e+', 'e');
}

/** A score rounded to a whole number, as Rust's `{:.0}` writes it. */
function wholeText(score: number | string | null | undefined): string {
  const v = asNumber(score);
  if (!Number.isFinite(v)) return 'inf';
  return Math.abs(v) < 1e21 ? v.toFixed(0) : BigInt(Math.round(v)).toString();
}

/** `{name}` placeholders filled in one pass (a value holding braces stays as it is). */
function fill(template: string, vars: Record<string, string>): string {
  return template.replace(/\{(\w+)\}/g, (whole, k: string) => (k in vars ? vars[k] : whole));
}

function metricLabel(metric: string): string {
  const key = `diag.metric.${metric}` as Key;
  const label = t(key);
  return label === key ? metric : label;
}

/** The template of a part: a weight's NaN is worded apart from its overflow. */
function templateKey(p: DiagnosisReasonPart): Key {
  if (p.kind === 'parameter_non_finite' && (p.target || p.golden).toLowerCase() === 'nan') return 'diag.reason.parameter_non_finite_nan';
  return `diag.reason.${p.kind}` as Key;
}

/** One part of a reason in words, with what it is (`kind`: the part's; empty for a reason said whole). */
export interface ReasonPiece {
  kind: string;
  text: string;
}

/**
 * A reason in the page's language, part by part; the English `reason` whole when there are no
 * parts or a part is of a kind this page does not know (a newer sidecar).
 */
export function reasonPieces(reason: string, parts: DiagnosisReasonPart[] | undefined): ReasonPiece[] {
  const known = new Set<string>(REASON_KINDS);
  if (!parts?.length || parts.some((p) => !known.has(p.kind))) return [{ kind: '', text: reason }];
  return parts.map((p) => ({
    kind: p.kind,
    text: fill(t(templateKey(p)), {
        name: p.name,
        entry: p.entry || t('diag.reason.anOutput'),
        metric: metricLabel(p.metric),
        err: errText(p.err),
        target: p.target,
        golden: p.golden,
        score: wholeText(p.score),
        // A module that changed its last dumped call's output: that call's error is in `score`.
        callErr: errText(p.score),
        // A weight that holds inf/NaN: its value, on the target's side or (`golden`) golden's.
        value: p.target || p.golden,
        side: !p.target && p.golden ? t('diag.reason.goldenSide') : '',
      }),
  }));
}

/** A reason in the page's language ([`reasonPieces`] joined). */
export function reasonText(reason: string, parts: DiagnosisReasonPart[] | undefined): string {
  return reasonPieces(reason, parts)
    .map((p) => p.text)
    .join(t('diag.reason.join'));
}

/** What a reason part says beyond its words (the score's meaning), as its tooltip; empty when nothing. */
export function reasonTip(kind: string): string {
  return kind === 'worse_than_inputs' ? t('diag.scoreTip') : '';
}

/**
 * The label of a fault's kind. A cause is said by what differs, read from its reason: a weight
 * (a parameter), an argument (`eps`, `p`, …) or both; "weight or argument" only when the reason
 * names neither (a newer sidecar's kind).
 */
export function kindLabel(g: Pick<DiagnosisGroup, 'kind' | 'reason_parts'>): string {
  if (g.kind === 'amplified') return t('diag.kind.amplified');
  if (g.kind !== 'cause') return t('diag.kind.introduced');
  const weight = g.reason_parts.some((p) => p.kind.startsWith('parameter_'));
  const argument = g.reason_parts.some((p) => p.kind === 'argument_differs');
  return t(weight && argument ? 'diag.kind.causeBoth' : weight ? 'diag.kind.causeWeight' : argument ? 'diag.kind.causeArgument' : 'diag.kind.cause');
}

/** Flat inclusive ranges `[first, last, first, last, ...]` as pairs. */
function pairs(flat: number[]): [number, number][] {
  const out: [number, number][] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([flat[i], flat[i + 1]]);
  return out;
}

/** Ranges as people write them: "0–1023, 1030". */
export function spansText(flat: number[]): string {
  return pairs(flat)
    .map(([a, b]) => (a === b ? String(a) : `${a}–${b}`))
    .join(', ');
}

/** 1 → "1st", 2 → "2nd", 11 → "11th" (graph_ascend_diagnose::group's ordinal). */
export function ordinal(n: number): string {
  const [ten, hundred] = [n % 10, n % 100];
  const suffix = hundred >= 11 && hundred <= 13 ? 'th' : ten === 1 ? 'st' : ten === 2 ? 'nd' : ten === 3 ? 'rd' : 'th';
  return `${n}${suffix}`;
}

/** A module's path as people write it: `Module.layers.2.mlp.fc1.Linear.forward` → `layers.2.mlp.fc1`. */
export function modulePath(module: string): string {
  const dot = module.indexOf('.');
  const body = dot > 0 && ['Module', 'Cell'].includes(module.slice(0, dot)) ? module.slice(dot + 1) : module;
  const parts = body.split('.');
  if (parts.length >= 3 && ['forward', 'backward'].includes(parts[parts.length - 1])) return parts.slice(0, -2).join('.');
  return body;
}

/** The weight and argument kinds that name a cause. */
const CAUSE_KINDS = new Set(['parameter_differs', 'parameter_md5_differs', 'parameter_non_finite', 'argument_differs']);

/**
 * A fault's line in the page's language: "`Functional.linear` (2nd call) in `layers.2.mlp.fc1` —
 * weight differs — 8 micro-batches, ranks 0–1023, from step 3"; in English exactly the sidecar's
 * `summary` (graph_ascend_diagnose::group).
 */
export function groupSummary(g: Pick<DiagnosisGroup, 'module' | 'api' | 'call' | 'kind' | 'reason_parts' | 'micro_steps' | 'ranks' | 'steps'>): string {
  const site = !g.api
    ? t('diag.group.module', { module: modulePath(g.module) })
    : t('diag.group.call', { api: g.api, nth: ordinal(g.call + 1), n: g.call + 1 }) + (g.module ? t('diag.group.in', { module: modulePath(g.module) }) : '');
  const causes = g.reason_parts.filter((p) => CAUSE_KINDS.has(p.kind)).map((p) => t('diag.group.differs', { name: p.name }));
  const what =
    g.kind === 'cause'
      ? causes.length
        ? causes.join(t('diag.group.listJoin'))
        : t('diag.group.cause')
      : g.kind === 'amplified'
        ? t('diag.group.amplified')
        : t('diag.group.introduced');
  const spread: string[] = [];
  if (g.micro_steps.length > 1) spread.push(t('diag.group.microBatches', { count: g.micro_steps.length }));
  const rankCount = pairs(g.ranks).reduce((n, [a, b]) => n + b - a + 1, 0);
  spread.push(t(rankCount === 1 ? 'diag.group.rank' : 'diag.group.ranks', { ranks: spansText(g.ranks) }));
  const steps = pairs(g.steps);
  const first = steps.length ? steps[0][0] : 0;
  const last = steps.length ? steps[steps.length - 1][1] : 0;
  spread.push(t(first === last ? 'diag.group.step' : 'diag.group.fromStep', { step: first }));
  return [site, what, spread.join(t('diag.group.listJoin'))].join(' — ');
}
