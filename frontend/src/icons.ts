/**
 * The page's icons: Lucide (ISC licence), bundled into the page by Vite (only the icons named here;
 * nothing is fetched at run time). Buttons carry the icon and a tooltip from i18n.ts; the icon
 * itself is hidden from screen readers (the button's title / aria-label names it).
 */
import {
  ArrowLeftRight,
  ChevronDown,
  ChevronUp,
  createElement,
  Database,
  Download,
  FileCog,
  ImageDown,
  Funnel,
  Keyboard,
  Languages,
  LayoutGrid,
  Link2,
  Map as MapIcon,
  Maximize,
  Moon,
  PanelBottomClose,
  PanelBottomOpen,
  PanelRightClose,
  PanelRightOpen,
  Search,
  Stethoscope,
  Share2,
  Sun,
  X,
  type IconNode,
} from 'lucide';

const ICONS = {
  data: Database,
  filter: Funnel,
  match: ArrowLeftRight,
  search: Search,
  convert: FileCog,
  light: Sun,
  dark: Moon,
  language: Languages,
  minimap: MapIcon,
  sync: Link2,
  hideBench: PanelRightClose,
  showBench: PanelRightOpen,
  hideDetails: PanelBottomClose,
  showDetails: PanelBottomOpen,
  shortcuts: Keyboard,
  fit: Maximize,
  link: Share2,
  up: ChevronUp,
  down: ChevronDown,
  close: X,
  diagnosis: Stethoscope,
  download: Download,
  picture: ImageDown,
  divergenceMap: LayoutGrid,
} satisfies Record<string, IconNode>;

export type IconName = keyof typeof ICONS;

export function icon(name: IconName): SVGElement {
  return createElement(ICONS[name], { class: 'icon', 'aria-hidden': 'true', width: 16, height: 16 });
}
