#!/usr/bin/env node
import { runTaoBench } from "./tao.js";

/* Entry of `npm run bench:tao` (tsx src/cli/bench/tao-main.ts). */

runTaoBench(process.argv.slice(2)).catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
