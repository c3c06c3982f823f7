import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

/**
 * tsx's loader, resolved from this tree, for `node --import` of a child that runs
 * TypeScript: found whatever the child's working directory or source tree.
 */
export const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
