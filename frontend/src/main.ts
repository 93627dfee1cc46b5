/** The app document's entry: styles, then the page. */
import './style.css';
import { App } from './app';
import { startReportMode } from './report/mode';

// A self-contained report answers the page's requests from its embedded data (docs/report.md).
startReportMode(document);

const host = document.getElementById('app');
if (host) {
  const app = new App(host);
  void app.start();
}
