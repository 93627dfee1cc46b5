/**
 * The diagnosis as the page reads it (the `diagnosis` route, docs/diagnosis.md): its JSON shapes,
 * the colour rule of the mode "where the error is introduced" (source / inherited / fine), and the
 * pure helpers of the Diagnosis panel (which view a source lives in, the CSV download's address).
 * Shared by the panel, the toolbar's legend and the app's box colours; no DOM here.
 */
import { WHITE, type ColorTable } from './colors';
import type { MetaData, RenderNode } from './types';

export type SourceKind = 'cause' | 'introduced' | 'amplified';

export interface DiagnosisSource {
  step: number;
  rank: number;
  node: string;
  golden_node: string;
  direction: 'forward' | 'backward' | 'update' | string;
  kind: SourceKind | string;
  score: number | string | null;
  reason: string;
  enclosing: string[];
}

export interface DiagnosisNonFinite {
  step: number;
  rank: number;
  node: string;
  direction: string;
  matched: boolean;
  reason: string;
}

export interface Diagnosis {
  mode: 'statistics' | 'tensor' | 'md5' | string;
  step: number;
  ranks: number[];
  origin_rank: number | null;
  first_non_finite: DiagnosisNonFinite[];
  sources: DiagnosisSource[];
  total_sources: number;
  nodes_judged: number;
}

/** The verdicts of one step and rank: matched nodes in neither list are fine. */
export interface DiagnosisStates {
  step: number;
  rank: number;
  source: string[];
  inherited: string[];
}

/** What the page keeps: the file's diagnosis, and the verdicts of the view they were asked for. */
export interface DiagnosisView {
  /** `run|tag` of the file. */
  file: string;
  data: Diagnosis;
  /** metaKey of the view the states are for. */
  statesKey: string;
  source: Set<string>;
  inherited: Set<string>;
}

export const DIAGNOSIS_COLORS = {
  source: 'rgb(229,72,77)',
  inherited: 'rgb(250,214,160)',
  fine: 'rgb(226,241,226)',
} as const;

export type Verdict = keyof typeof DIAGNOSIS_COLORS;

export function verdictOf(view: Pick<DiagnosisView, 'source' | 'inherited'>, key: string): Verdict {
  if (view.source.has(key)) return 'source';
  if (view.inherited.has(key)) return 'inherited';
  return 'fine';
}

/**
 * A box's fill in the mode "where the error is introduced": the target side's matched nodes by
 * their verdict; unmatched nodes as in msprobe's mode; the golden side white. Without verdicts for
 * the view (still loading, or none), every box is white rather than falsely "fine".
 */
export function diagnosisFill(
  view: Pick<DiagnosisView, 'source' | 'inherited'> | null,
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

export function fileKey(m: Pick<MetaData, 'run' | 'tag'>): string {
  return `${m.run}|${m.tag}`;
}

/** The step and rank to switch to before a source can be shown (null: it is in the view). */
export function viewFor(source: Pick<DiagnosisSource, 'step' | 'rank'>, m: Pick<MetaData, 'step' | 'rank'>): { step: number; rank: number } | null {
  return source.step === m.step && source.rank === m.rank ? null : { step: source.step, rank: source.rank };
}

/** The relative address of the CSV of the shown step and rank (`exportCsv`, rendered by the sidecar). */
export function csvAddress(m: Pick<MetaData, 'run' | 'tag' | 'lang' | 'step' | 'rank'>): string {
  const q = new URLSearchParams({ run: m.run, tag: m.tag, lang: m.lang, step: String(m.step), rank: String(m.rank) });
  return `exportCsv?${q.toString()}`;
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

/** The score as the list shows it: "×12", "×1.2e+4", or nothing (md5, infinite). */
export function scoreText(score: DiagnosisSource['score']): string {
  const v = typeof score === 'number' ? score : Number(score);
  if (score === null || !Number.isFinite(v)) return '';
  return v >= 1e4 ? `×${v.toExponential(1)}` : `×${v >= 10 ? v.toFixed(0) : v.toFixed(1)}`;
}
