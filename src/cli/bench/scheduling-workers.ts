import { Worker } from "node:worker_threads";
import type { PolicyName } from "../../sim/des/policies.js";
import type { ProgramSpec } from "../../sim/workload/index.js";
import type { WindowSpec } from "../../sim/report/steady-state.js";
import { type RunOutput, type RunPlan, type RunSettings, runSteadyState, type Simulate } from "./scheduling-run.js";
import type { BenchProgress } from "./scheduling-progress.js";

/*
 * Where the benchmark's steady-state runs execute: in this thread one after the
 * other, or (--jobs N) in N worker threads, each holding the programs once and
 * taking (policy, rate) jobs. Runs are deterministic, so where they execute changes
 * no figure, only the wall time.
 */

export interface RunJob {
  policy: PolicyName;
  rate: number;
  drainCapMs: number;
}

export interface RunExecutor {
  run(job: RunJob, label: string, summary: (output: RunOutput) => string): Promise<RunOutput>;
  close(): Promise<void>;
}

export type ExecutorFactory = (plan: RunPlan, progress: BenchProgress) => RunExecutor;

/** In this thread, one run at a time (and with an injected simulator, for tests). */
export function localExecutor(simulate: Simulate): ExecutorFactory {
  return (plan, progress) => ({
    run: (job, label, summary) => {
      progress.startRun(label, plan.window.measured);
      const output = runSteadyState(plan, simulate, job.policy, job.rate, job.drainCapMs, (p) => progress.update(p));
      progress.endRun(summary(output), label);
      return Promise.resolve(output);
    },
    close: () => Promise.resolve(),
  });
}

/** What a worker is started with (structured-cloned once). */
export interface WorkerInit {
  programs: readonly ProgramSpec[];
  settings: RunSettings;
  windowSpec: WindowSpec;
}

export type WorkerReply = { id: number; output: RunOutput } | { id: number; error: string };

/** N worker threads (scheduling-worker.ts), each running one job at a time. */
export function workerExecutor(jobs: number, windowSpec: WindowSpec): ExecutorFactory {
  return (plan, progress) => {
    const init: WorkerInit = { programs: plan.programs, settings: plan.settings, windowSpec };
    // The bench runs from TypeScript source under tsx; the boot file registers tsx in the worker.
    const entry = new URL("./scheduling-worker-boot.mjs", import.meta.url);
    const workers = Array.from({ length: jobs }, () => new Worker(entry, { workerData: init }));
    const idle = [...workers];
    const queue: { id: number; job: RunJob; label: string; summary: (o: RunOutput) => string; resolve: (o: RunOutput) => void; reject: (e: Error) => void }[] = [];
    const pending = new Map<number, (typeof queue)[number]>();
    let nextId = 0;
    let failed: Error | undefined;

    const pump = (): void => {
      while (idle.length > 0 && queue.length > 0) {
        const worker = idle.pop() as Worker;
        const task = queue.shift() as (typeof queue)[number];
        pending.set(task.id, task);
        progress.startRun(task.label, plan.window.measured);
        worker.postMessage({ id: task.id, ...task.job });
      }
    };
    for (const worker of workers) {
      worker.on("message", (reply: WorkerReply) => {
        const task = pending.get(reply.id);
        pending.delete(reply.id);
        idle.push(worker);
        if (task !== undefined) {
          if ("error" in reply) task.reject(new Error(reply.error));
          else {
            progress.endRun(task.summary(reply.output), task.label);
            task.resolve(reply.output);
          }
        }
        pump();
      });
      worker.on("error", (error: Error) => {
        failed = error;
        for (const task of [...pending.values(), ...queue]) task.reject(error);
        pending.clear();
        queue.length = 0;
      });
    }
    return {
      run: (job, label, summary) =>
        new Promise<RunOutput>((resolve, reject) => {
          if (failed !== undefined) {
            reject(failed);
            return;
          }
          queue.push({ id: nextId++, job, label, summary, resolve, reject });
          pump();
        }),
      close: async () => {
        await Promise.all(workers.map((w) => w.terminate()));
      },
    };
  };
}
