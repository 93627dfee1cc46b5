/**
 * The JSON shapes of the GRAPH_ASCEND routes as the page reads them. The answers are msprobe 26.2's
 * shapes, generated from the proto with its JSON options (`generated/proto.ts`, do not copy them
 * here); what is written by hand below is what the proto does not say, each with why.
 */
import type * as pb from './generated/proto';

export type { CatalogError, ConvertCandidates, DetailColumn, FilterHit, JsonValue, MatchedRelations, NonFinite } from './generated/proto';

/** The page's languages (the proto's `lang` is any string; the sidecar falls back to English). */
export type Lang = 'zh' | 'en';
/** A graph's side as requests name it (the proto's `node_type`/`graph_type` strings). */
export type Side = 'NPU' | 'Bench' | 'Single';

/**
 * The page's selection, sent as `metaData` (the proto's MetaData, whose fields a request may leave
 * out): the page always has every field, and only these values.
 */
export interface MetaData extends Required<pb.MetaData> {
  type: 'db';
  lang: Lang;
}

/** The catalog: `{run: {type, tags}}` (`load_meta_dir`, `watchMetaDir`). */
export type Catalog = pb.LoadMetaDirResponse['data'];

/**
 * One colour of the legend, the value of `{color: {value, description, accuracy_level}}`. Each part
 * optional: the legend is the file's own table (msprobe's `tb_config.node_colors`), read as it is.
 */
export type ColorEntry = Partial<Omit<pb.ColorLegend, 'color'>>;

/**
 * A file's configuration (`loadGraphConfigInfo`). `detailColumns` is beyond msprobe: msprobe's own
 * answers (the dev replay server's recordings) lack it, and then nothing is painted.
 */
export type ConfigInfo = Omit<pb.ConfigInfo, 'detailColumns' | 'colors'> &
  Partial<Pick<pb.ConfigInfo, 'detailColumns'>> & { colors: Record<string, ColorEntry> };

/** One box of the server-side layout (`changeNodeExpandState` answers, keyed by node name). */
export type RenderNode = pb.HierarchyResponse['data'][string];

/**
 * What a communication node's `matched_distributed` holds (a `Struct` in the proto: its content
 * is msprobe's converter's, which the proto does not describe).
 */
export interface MatchedDistributed {
  communications_type?: string;
  nodes_info?: Record<string, [string | number, string]>;
}

/** One input or output slot of a node's details: `{statistic: value}`. */
export type TensorSlot = pb.NodeDetail['input_data'][string];

/**
 * One side of a node's details (`getNodeInfo`). The details helpers take any part of it: a side
 * may be missing, and the tests build only the parts they read.
 */
export type NodeDetail = Partial<pb.NodeDetail>;

/** A node's details: `{npu, bench}`, a side `null` when the node has no counterpart there. */
export type NodeInfo = pb.NodeInfoResponse['data'];

/**
 * A conversion's progress (`getConvertProgress` events, `getConvertState`). Only `progress` and
 * `status` are always there: the measures are beyond msprobe (its events have none), and the page
 * starts from `{progress: 0, status: 'building'}`.
 */
export type ConvertProgress = Partial<pb.ConvertProgress> & Pick<pb.ConvertProgress, 'progress' | 'status'>;

/** Node kinds as the server sends them in `nodeType` (the proto's comment on `RenderNode.node_type`). */
export const NodeKind = { MODULE: 0, LEAF: 1, MULTI_COLLECTION: 8, API_LIST: 9 } as const;
