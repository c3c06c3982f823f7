#!/usr/bin/env node
import { formatRecognitionReport, parseRecognitionBenchArgs, RECOGNITION_BENCH_USAGE, runRecognitionBench } from "./recognition.js";

/* Entry of `npm run bench:recognition` (tsx src/cli/bench/recognition-main.ts). */

try {
  const argv = process.argv.slice(2);
  const options = parseRecognitionBenchArgs(argv);
  if (options === undefined) console.log(RECOGNITION_BENCH_USAGE);
  else {
    const report = runRecognitionBench(options, argv);
    process.stdout.write(options.json ? `${JSON.stringify(report, null, 2)}\n` : formatRecognitionReport(report));
  }
} catch (error) {
  console.error(error instanceof Error ? error.message : String(error));
  process.exitCode = 1;
}
