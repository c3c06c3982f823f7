/*
 * Program-level service accounting (Autellix). PLAS: the program's attained
 * service is the sum of its completed calls' service. ATLAS: a call records the
 * program's critical-path value `h` when it starts; on completion the value becomes
 * max(value, h + service), so parallel siblings do not add up.
 */

export interface ProgramService {
  /** PLAS value: total service of completed calls (ms). */
  attainedServiceMs: number;
  /** ATLAS value: longest observed execution path (ms). */
  criticalPathMs: number;
}

export const NO_SERVICE: ProgramService = { attainedServiceMs: 0, criticalPathMs: 0 };

/** The `h` a starting call records. */
export function callStartValue(program: ProgramService): number {
  return program.criticalPathMs;
}

export function completeCall(program: ProgramService, startValueMs: number, serviceMs: number): ProgramService {
  return {
    attainedServiceMs: program.attainedServiceMs + serviceMs,
    criticalPathMs: Math.max(program.criticalPathMs, startValueMs + serviceMs),
  };
}
