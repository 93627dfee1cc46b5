/**
 * Whether this document is a self-contained report (`graph-ascend report`): if it embeds a
 * report's data, the page's requests are answered from them (source.ts) and the report's corner
 * (about.ts) is shown. Called once, before the page starts.
 */
import { reportAbout } from './about';
import './report.css';
import { embeddedReport, installReportSource, ReportSource } from './source';

export function startReportMode(doc: Document): boolean {
  const data = embeddedReport(doc);
  if (!data) return false;
  installReportSource(new ReportSource(data));
  doc.documentElement.classList.add('ga-report');
  reportAbout(doc.body, data);
  return true;
}
