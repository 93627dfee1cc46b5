/** The app document's entry: styles, then the page. */
import './style.css';
import { App } from './app';

const host = document.getElementById('app');
if (host) {
  const app = new App(host);
  void app.start();
}
