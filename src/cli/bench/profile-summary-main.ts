import { readFileSync } from "node:fs";
import { CpuProfile, formatProfileSummary, summariseProfile } from "./profile-summary.js";

const [file, topRaw] = process.argv.slice(2);
const top = topRaw === undefined ? 30 : Number(topRaw);
if (file === undefined || !Number.isInteger(top) || top <= 0) {
  console.error("usage: npm run bench:profile -- FILE.cpuprofile [top N]");
  process.exit(2);
}
console.log(formatProfileSummary(summariseProfile(CpuProfile.parse(JSON.parse(readFileSync(file, "utf8"))), top)));
