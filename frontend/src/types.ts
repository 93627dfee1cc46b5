/** The JSON shapes of msprobe 26.2's GRAPH_ASCEND routes, as the page reads them. */

export type Lang = 'zh' | 'en';
export type Side = 'NPU' | 'Bench' | 'Single';

export interface MetaData {
  run: string;
  tag: string;
  type: 'db';
  lang: Lang;
  microStep: number;
  step: number;
  rank: number;
}

export interface CatalogError {
  run: string;
  tag: string;
  info: string;
}

export type Catalog = Record<string, { type: string; tags: string[] }>;

export interface ColorEntry {
  value: [number, number] | [] | string;
  description?: string;
  accuracy_level?: string;
}

export interface ConfigInfo {
  microSteps: number;
  tooltips?: Record<string, string> | null;
  overflowCheck: boolean;
  isSingleGraph: boolean;
  colors: Record<string, ColorEntry>;
  matchedConfigFiles: string[];
  task: string;
  ranks: number[];
  steps: number[];
  /** The details table's known columns in order, metrics with their rules (absent from older sidecars: nothing is painted). */
  detailColumns?: DetailColumn[];
}

/** One known column of the details table (the proto's DetailColumn). */
export interface DetailColumn {
  name: string;
  /** "higher": a larger |value| is worse; "lower": a value below 1 is worse; "": not a metric. */
  worse: string;
  /** Distances from perfect at or below this are not painted (percent values as fractions). */
  threshold: number;
}

/** One box of the server-side layout (`changeNodeExpandState` answers). */
export interface RenderNode {
  x: number;
  y: number;
  width: number;
  height: number;
  expand: boolean;
  isRoot: boolean;
  parentNode: string;
  label: string;
  name: string;
  nodeType: number;
  matchedNodeLink: string[];
  precisionIndex: number | string | null;
  overflowLevel: string | null;
  matchedDistributed: MatchedDistributed | Record<string, never> | null;
}

export interface MatchedDistributed {
  communications_type?: string;
  nodes_info?: Record<string, [string | number, string]>;
}

export type TensorSlot = Record<string, string | number | null>;

export interface NodeDetail {
  id?: string;
  node_name?: string;
  node_type?: number;
  input_data?: Record<string, TensorSlot>;
  output_data?: Record<string, TensorSlot>;
  upnode?: string;
  subnodes?: string[];
  matched_node_link?: string[];
  stack_info?: string[];
  parallel_merge_info?: string[] | string;
  micro_step_id?: number;
  data?: { precision_index?: number | string | null; overflow_level?: string | null };
  matched_distributed?: MatchedDistributed;
}

export interface NodeInfo {
  npu?: NodeDetail | null;
  bench?: NodeDetail | null;
}

export interface FilterHit {
  name: string;
  status: string;
}

export interface MatchedRelations {
  npuMatchNodes: Record<string, string>;
  benchMatchNodes: Record<string, string>;
  npuUnMatchNodes: string[];
  benchUnMatchNodes: string[];
  matchedTotal?: number;
  matchedSuccess?: number;
}

export interface ConvertCandidates {
  dirs: string[];
  yaml_files: string[];
}

export interface ConvertProgress {
  progress: number;
  status: 'building' | 'done' | 'error' | 'cancelled';
  error?: string[] | string;
  jobId?: string;
  outputFile?: string;
  /** Beyond msprobe: input bytes read, rows written (rowsTotal 0 until known), seconds left. */
  bytesRead?: number;
  bytesTotal?: number;
  rowsWritten?: number;
  rowsTotal?: number;
  etaSeconds?: number;
  stage?: string;
}

/** Node kinds as the server sends them in `nodeType`. */
export const NodeKind = { MODULE: 0, LEAF: 1, MULTI_COLLECTION: 8, API_LIST: 9 } as const;
