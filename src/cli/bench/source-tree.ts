import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readlinkSync, renameSync, rmSync, statSync, symlinkSync } from "node:fs";
import os from "node:os";
import path from "node:path";

/*
 * The checkout a benchmark runs a second pool core from (--baseline-pool, --pool-tree):
 * a directory as given, or a git revision of this repository, extracted once (git
 * archive, no worktree, no checkout touched) into the temp directory with this tree's
 * node_modules linked in, and kept there for the next run of the same commit.
 */

/**
 * Points a kept tree's node_modules at `root`'s: the tree may have been extracted by
 * another checkout of the same repository (a clean clone since deleted), whose
 * node_modules the link still names. Replaced by rename, so a concurrent run never
 * sees the tree without one.
 */
function linkNodeModules(tree: string, root: string): void {
  const wanted = path.join(root, "node_modules");
  const link = path.join(tree, "node_modules");
  try {
    if (readlinkSync(link) === wanted) return;
  } catch {
    // Missing or not a link: made below.
  }
  const fresh = `${link}.${process.pid}-${Date.now()}`;
  symlinkSync(wanted, fresh);
  renameSync(fresh, link);
}

function isDirectory(candidate: string): boolean {
  try {
    return statSync(candidate).isDirectory();
  } catch {
    return false;
  }
}

/** `spec` as a directory (relative to the working directory), else as a git revision of `root`'s repository. */
export function sourceTreeOf(spec: string, root: string): string {
  const asPath = path.resolve(process.cwd(), spec);
  if (isDirectory(asPath)) return asPath;
  let commit: string;
  try {
    commit = execFileSync("git", ["-C", root, "rev-parse", "--verify", "--quiet", `${spec}^{commit}`], { encoding: "utf8" }).trim();
  } catch {
    throw new Error(`${spec} is neither a directory nor a git revision of ${root}`);
  }
  const tree = path.join(os.tmpdir(), `agentix-tree-${commit.slice(0, 12)}`);
  if (existsSync(path.join(tree, "package.json"))) {
    linkNodeModules(tree, root);
    return tree;
  }
  // Extracted beside, then renamed: a run stopped halfway leaves no half tree under the final name.
  const partial = mkdtempSync(`${tree}.partial-`);
  try {
    const archive = execFileSync("git", ["-C", root, "archive", "--format=tar", commit], { maxBuffer: 1 << 30 });
    execFileSync("tar", ["-x", "-C", partial], { input: archive });
    symlinkSync(path.join(root, "node_modules"), path.join(partial, "node_modules"));
    mkdirSync(path.dirname(tree), { recursive: true });
    renameSync(partial, tree);
  } catch (error) {
    rmSync(partial, { recursive: true, force: true });
    // Another run extracted the same commit meanwhile.
    if (existsSync(path.join(tree, "package.json"))) {
      linkNodeModules(tree, root);
      return tree;
    }
    throw error;
  }
  return tree;
}
