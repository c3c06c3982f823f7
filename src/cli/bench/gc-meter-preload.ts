import { startGcMeter } from "./gc-meter.js";

// `node --import` this file into a benchmark server process (gc-meter.ts).
startGcMeter();
