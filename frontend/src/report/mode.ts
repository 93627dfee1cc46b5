/**
 * Whether this document is a self-contained report (`graph-ascend report`): if it embeds a
 * report's data, the page's requests are answered from them (source.ts) and the report's corner
 * (about.ts) is shown. Called once, before the page starts; the page asks `shownReport()` where
 * to open (the first source) and which steps and ranks the report holds.
 */
import { reportAbout } from './about';
import './report.css';
import { embeddedReport, installReportSource, ReportSource } from './source';

let shown: ReportSource | null = null;

export function startReportMode(doc: Document): boolean {
  const data = embeddedReport(doc);
  if (!data) return false;
  shown = new ReportSource(data);
  installReportSource(shown);
  doc.documentElement.classList.add('ga-report');
  reportAbout(doc.body, data);
  return true;
}

/** The report this document is (null: the page in TensorBoard). */
export function shownReport(): ReportSource | null {
  return shown;
}
