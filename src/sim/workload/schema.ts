import { z } from "zod";
import { THREAD_NAME } from "../../protocol/ids.js";
import { ChatParams, CodingAgentParams, FunctionCallingParams, TreeSearchParams } from "./kinds.js";

/*
 * A workload file: who arrives when, and what each program does.
 *
 *   {
 *     "name": "my-mix", "description": "optional", "seed": 7,
 *     "arrival": { "process": "poisson", "ratePerSec": 0.5 }   | { "process": "batch" }  (all at t = 0)
 *     "programs": { "count": 2000 } | { "durationSec": 600 }     (a bare number is a count)
 *     "tenants": [{ "id": "acme", "weight": 3, "planWeight": 2 }, ...]
 *                                                  (optional: drawn per program by weight;
 *                                                   planWeight is the pool's fair-share weight, default 1)
 *     "mix": [{ "kind": "chat", "weight": 2, "params": { ... } }, ...]
 *   }
 *
 * Parsing fills every knob's default (kinds.ts), so the parsed value is the complete
 * description: serialising it and parsing again gives the same workload. Unknown
 * keys are errors, so a misspelt knob is never silently defaulted.
 */

/** Upper bound on programs in one workload (a typo guard, not a simulator limit). */
export const MAX_PROGRAMS = 1_000_000;

const finite = z.number().refine(Number.isFinite, "must be a finite number");
const positive = finite.refine((v) => v > 0, "must be > 0");

export const ArrivalSpec = z.discriminatedUnion("process", [
  z.strictObject({ process: z.literal("poisson"), ratePerSec: positive }),
  z.strictObject({ process: z.literal("batch") }),
]);
export type ArrivalSpec = z.output<typeof ArrivalSpec>;

export const ProgramsSpec = z.preprocess(
  (input) => (typeof input === "number" ? { count: input } : input),
  z
    .strictObject({
      count: z.int().min(1).max(MAX_PROGRAMS).optional(),
      durationSec: positive.optional(),
    })
    .superRefine((value, ctx) => {
      if ((value.count === undefined) === (value.durationSec === undefined)) {
        ctx.addIssue({ code: "custom", path: [], message: "give exactly one of count or durationSec" });
      }
    }),
);
export type ProgramsSpec = z.output<typeof ProgramsSpec>;

const TENANT_ID = /^[\w.:-]{1,64}$/;
const tenantId = z.string().regex(TENANT_ID, "1–64 of letters, digits, _ . : -");
const weight = finite.refine((v) => v >= 0, "must be ≥ 0");

const entryFields = {
  weight: weight.default(1),
  /** Pins this entry's programs to one tenant (else drawn from `tenants`). */
  tenantId: tenantId.optional(),
  /** Names the shared system prompt (prefix-cache identity); default `<kind>#<index>`. */
  systemPromptId: z.string().regex(THREAD_NAME, "1–64 of letters, digits, _ . : -").optional(),
};

export const MixEntry = z.discriminatedUnion("kind", [
  z.strictObject({ kind: z.literal("chat"), ...entryFields, params: ChatParams.prefault({}) }),
  z.strictObject({ kind: z.literal("function-calling"), ...entryFields, params: FunctionCallingParams.prefault({}) }),
  z.strictObject({ kind: z.literal("tree-search"), ...entryFields, params: TreeSearchParams.prefault({}) }),
  z.strictObject({ kind: z.literal("coding-agent"), ...entryFields, params: CodingAgentParams.prefault({}) }),
]);
export type MixEntry = z.output<typeof MixEntry>;

export const Workload = z
  .strictObject({
    name: z.string().min(1).max(100),
    description: z.string().max(2_000).optional(),
    /** PRNG seed; the same seed always generates the same programs. Default 1. */
    seed: z.int().min(0).max(2 ** 32 - 1).optional(),
    arrival: ArrivalSpec,
    programs: ProgramsSpec,
    /**
     * `weight`: the tenant's share of the traffic (programs are drawn by it).
     * `planWeight`: its plan weight for the pool's fair share (x-agentix-weight); a
     * separate figure, default 1, so tenants that send more do not also get more.
     * `churnsPrograms`: its client opens a new program for every call (no program
     * header and nothing the edge could join them by), as a tenant gaming the queue would.
     * `mirrors`: it sends a twin of each of that tenant's programs, the same calls at the
     * same instants with text of its own (a paired comparison in one run); such a tenant
     * draws nothing itself (weight 0).
     */
    tenants: z
      .array(
        z.strictObject({
          id: tenantId,
          weight: weight.default(1),
          planWeight: positive.optional(),
          churnsPrograms: z.boolean().default(false),
          mirrors: tenantId.optional(),
        }),
      )
      .min(1)
      .optional(),
    mix: z.array(MixEntry).min(1, "needs at least one entry"),
  })
  .superRefine((w, ctx) => {
    if (w.mix.length > 0 && !w.mix.some((entry) => entry.weight > 0)) {
      ctx.addIssue({ code: "custom", path: ["mix"], message: "at least one entry needs weight > 0" });
    }
    if (w.tenants !== undefined && !w.tenants.some((t) => t.weight > 0)) {
      ctx.addIssue({ code: "custom", path: ["tenants"], message: "at least one tenant needs weight > 0" });
    }
    (w.tenants ?? []).forEach((t, i) => {
      if (t.mirrors === undefined) return;
      const source = w.tenants?.find((other) => other.id === t.mirrors);
      if (source === undefined || source.id === t.id || source.mirrors !== undefined) {
        ctx.addIssue({ code: "custom", path: ["tenants", i, "mirrors"], message: "must name another tenant of the workload that mirrors none itself" });
      } else if (t.weight > 0) {
        ctx.addIssue({ code: "custom", path: ["tenants", i, "weight"], message: "a tenant that mirrors another sends only the twins: give it weight 0" });
      }
    });
    const { durationSec } = w.programs;
    if (durationSec !== undefined) {
      if (w.arrival.process !== "poisson") {
        ctx.addIssue({ code: "custom", path: ["programs", "durationSec"], message: "needs a poisson arrival process (batch arrivals all come at t = 0): give a count" });
      } else if (durationSec * w.arrival.ratePerSec > MAX_PROGRAMS) {
        ctx.addIssue({ code: "custom", path: ["programs", "durationSec"], message: `expects ${Math.round(durationSec * w.arrival.ratePerSec)} programs at this rate; at most ${MAX_PROGRAMS}` });
      }
    }
  });
export type Workload = z.output<typeof Workload>;

export interface WorkloadIssue {
  /** Dotted path, e.g. `mix.1.params.callsPerProgram.median`; empty for the whole file. */
  path: string;
  message: string;
}

/** A workload that cannot be used; the message lists every problem with its field. */
export class WorkloadError extends Error {
  constructor(
    readonly issues: readonly WorkloadIssue[],
    readonly source?: string,
  ) {
    const where = source === undefined ? "" : ` (${source})`;
    const lines = issues.map((issue) => `  - ${issue.path === "" ? "(workload)" : issue.path}: ${issue.message}`);
    super(`invalid workload${where}:\n${lines.join("\n")}`);
    this.name = "WorkloadError";
  }
}

function issuePath(path: readonly PropertyKey[]): string {
  return path.map((key) => String(key)).join(".");
}

/** Validates a workload (parsed JSON) and fills every default; throws WorkloadError. */
export function parseWorkload(json: unknown, source?: string): Workload {
  const parsed = Workload.safeParse(json);
  if (parsed.success) return parsed.data;
  throw new WorkloadError(
    parsed.error.issues.map((issue) => ({ path: issuePath(issue.path), message: issue.message })),
    source,
  );
}
