import type { Env } from "../env.js";

/*
 * bench:edge's instrumentation (COUNT_IO=1; off, nothing here runs): counts, per request,
 * the Durable Object calls the Worker makes, how many sequential rounds they took (calls
 * started while another is in flight share its round), and the D1 queries (a batch is
 * one), up to the moment the call is forwarded to a pool: its critical path. Module-level
 * totals also count the D1 queries of the objects in this isolate, and apart, those of the
 * ledger (usage rows and program rows), so a bench can tell them from background reads
 * (the pool directory, key use, tenant reloads), which come with time, not with calls.
 */

export interface IoCounts {
  objectCalls: number;
  objectRounds: number;
  d1Queries: number;
}

class RequestIo {
  readonly counts: IoCounts = { objectCalls: 0, objectRounds: 0, d1Queries: 0 };
  #inFlight = 0;
  /** The counts when the call was forwarded to a pool. */
  forwarded: IoCounts | undefined;

  objectCallStarted(): void {
    this.counts.objectCalls += 1;
    if (this.#inFlight === 0) this.counts.objectRounds += 1;
    this.#inFlight += 1;
  }

  objectCallEnded(): void {
    this.#inFlight -= 1;
  }

  d1Query(): void {
    this.counts.d1Queries += 1;
  }
}

/** Where the isolate's totals are read (COUNT_IO=1 only; index.ts). */
export const IO_TOTALS_PATH = "/debug/io-totals";

/** D1 queries by every counted D1 handle in this isolate (Worker and objects), since it started; `ledger` is part of `objects`. */
export const isolateD1Queries = { worker: 0, objects: 0, ledger: 0 };

/** Programs' hand-offs to their tenant's ledger in this isolate, since it started: one Durable Object request each, after the response. */
export const isolateHandOffs = { count: 0 };

/** A program hands rows to its ledger (counted with COUNT_IO=1 only). */
export function countHandOff(env: Env): void {
  if (countingIo(env)) isolateHandOffs.count += 1;
}

const requestIo = new WeakMap<object, RequestIo>();

export const countingIo = (env: Env): boolean => env.COUNT_IO === "1";

/** A D1 handle that counts its queries; batches are unwrapped to the real statements D1 expects. */
function countedD1(db: D1Database, count: () => void): D1Database {
  const originals = new WeakMap<object, D1PreparedStatement>();
  const statement = (real: D1PreparedStatement): D1PreparedStatement => {
    const wrapped = new Proxy(real, {
      get(target, prop) {
        const value: unknown = Reflect.get(target, prop);
        if (typeof value !== "function") return value;
        if (prop === "bind") return (...args: unknown[]) => statement(target.bind(...args));
        return (...args: unknown[]) => {
          count();
          return Reflect.apply(value, target, args) as unknown;
        };
      },
    });
    originals.set(wrapped, real);
    return wrapped;
  };
  return new Proxy(db, {
    get(target, prop) {
      if (prop === "prepare") return (query: string) => statement(target.prepare(query));
      if (prop === "batch") {
        return (statements: D1PreparedStatement[]) => {
          count();
          return target.batch(statements.map((s) => originals.get(s) ?? s));
        };
      }
      const value: unknown = Reflect.get(target, prop);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        count();
        return Reflect.apply(value, target, args) as unknown;
      };
    },
  });
}

/** A Durable Object namespace whose stubs count their calls. */
function countedNamespace<T extends object>(namespace: T, io: RequestIo): T {
  return new Proxy(namespace, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop);
      if (typeof value !== "function") return value;
      if (prop !== "get") return (...args: unknown[]) => Reflect.apply(value, target, args) as unknown;
      return (...args: unknown[]) => {
        const stub = Reflect.apply(value, target, args) as object;
        return new Proxy(stub, {
          get(stubTarget, method) {
            const member: unknown = Reflect.get(stubTarget, method);
            if (typeof member !== "function") return member;
            return async (...callArgs: unknown[]) => {
              io.objectCallStarted();
              try {
                return (await Reflect.apply(member, stubTarget, callArgs)) as unknown;
              } finally {
                io.objectCallEnded();
              }
            };
          },
        });
      };
    },
  });
}

/** The Worker's bindings for one request, counted (COUNT_IO=1), or as they are. */
export function countedRequestEnv(env: Env): Env {
  if (!countingIo(env)) return env;
  const io = new RequestIo();
  const counted: Env = {
    ...env,
    DB: countedD1(env.DB, () => {
      io.d1Query();
      isolateD1Queries.worker += 1;
    }),
    PROGRAM_SESSION: countedNamespace(env.PROGRAM_SESSION, io),
    TENANT_LIMITER: countedNamespace(env.TENANT_LIMITER, io),
    POOL_MONITOR: countedNamespace(env.POOL_MONITOR, io),
    PROGRAM_INDEX: countedNamespace(env.PROGRAM_INDEX, io),
  };
  requestIo.set(counted, io);
  return counted;
}

/** An object's D1 handle, counted in the isolate's totals (COUNT_IO=1), or as it is; `ledger`: its writes are the usage ledger's. */
export function countedObjectD1(env: Env, use: "ledger" | "other" = "other"): D1Database {
  if (!countingIo(env)) return env.DB;
  return countedD1(env.DB, () => {
    isolateD1Queries.objects += 1;
    if (use === "ledger") isolateD1Queries.ledger += 1;
  });
}

/** The call is being forwarded: what it cost so far is its critical path (the first attempt's). */
export function noteForwarded(env: Env): void {
  const io = requestIo.get(env);
  if (io && !io.forwarded) io.forwarded = { ...io.counts };
}

/** The x-agentix-io-counts value for a forwarded call: "objects=2;rounds=1;d1=0". */
export function forwardedIoHeader(env: Env): string | undefined {
  const counts = requestIo.get(env)?.forwarded;
  return counts && `objects=${counts.objectCalls};rounds=${counts.objectRounds};d1=${counts.d1Queries}`;
}
