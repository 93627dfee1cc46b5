// Builds the page into the Python package. Two entries:
//  - index.html: the app, served by the plugin at /data/plugin/graph_ascend/index.html;
//  - index.js: the ES module TensorBoard's plugin iframe imports; its render() moves the iframe to
//    index.html so every relative fetch resolves under the plugin's route (also under --path_prefix).
// base './' keeps every asset URL relative: no absolute URL, no CDN, no inline script.
import { defineConfig } from 'vitest/config';
import { fileURLToPath } from 'node:url';

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

export default defineConfig({
  base: './',
  build: {
    outDir: here('../python_shim/graph_ascend_tb/static'),
    emptyOutDir: true,
    target: 'es2022',
    modulePreload: { polyfill: false },
    rollupOptions: {
      input: {
        app: here('index.html'),
        index: here('src/entry.ts'),
      },
      preserveEntrySignatures: 'exports-only',
      output: {
        entryFileNames: (chunk) => (chunk.name === 'index' ? 'index.js' : 'assets/[name]-[hash].js'),
      },
    },
  },
  test: {
    include: ['tests/**/*.test.ts'],
    environment: 'node',
  },
});
