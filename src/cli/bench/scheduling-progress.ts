/*
 * Progress of a benchmark on stderr. On a terminal: one bar redrawn in place (at most
 * ten times a second). Elsewhere (CI logs, pipes): a plain line per finished run and a
 * heartbeat line during a long run, so logs stay readable.
 */

export interface ProgressSink {
  write(text: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

export interface RunProgress {
  simMs: number;
  finishedPrograms: number;
  totalPrograms: number;
}

const BAR_WIDTH = 24;
const TTY_INTERVAL_MS = 100;
const HEARTBEAT_MS = 15_000;

function duration(ms: number): string {
  const s = Math.round(ms / 1_000);
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
}

export class BenchProgress {
  private totalRuns: number;
  private doneRuns = 0;
  private label = "";
  private run: RunProgress = { simMs: 0, finishedPrograms: 0, totalPrograms: 0 };
  private readonly startedMs: number;
  private lastDrawMs = Number.NEGATIVE_INFINITY;
  private lastHeartbeatMs: number;
  private drawn = false;

  constructor(
    private readonly sink: ProgressSink,
    totalRuns: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.totalRuns = totalRuns;
    this.startedMs = now();
    this.lastHeartbeatMs = this.startedMs;
  }

  /** The ladder can grow while it runs (it extends until the SLO is missed). */
  addRuns(n: number): void {
    this.totalRuns += n;
  }

  startRun(label: string, totalPrograms: number): void {
    this.label = label;
    this.run = { simMs: 0, finishedPrograms: 0, totalPrograms };
    this.lastHeartbeatMs = this.now();
    this.draw(true);
  }

  update(progress: RunProgress): void {
    this.run = progress;
    this.draw(false);
  }

  /** `summary`: a short result shown in the plain log line; `label`: the run's, when runs overlap (--jobs). */
  endRun(summary: string, label: string = this.label): void {
    this.doneRuns++;
    this.run = { ...this.run, finishedPrograms: this.run.totalPrograms };
    if (this.sink.isTTY) this.draw(true);
    else this.sink.write(`[${this.doneRuns}/${this.totalRuns}] ${label}: ${summary} (${duration(this.now() - this.startedMs)} elapsed)\n`);
  }

  /** Clears the bar so the table prints on a clean line. */
  finish(): void {
    if (this.sink.isTTY && this.drawn) this.sink.write("\r\x1b[2K");
    this.drawn = false;
  }

  private fraction(): number {
    const within = this.run.totalPrograms > 0 ? this.run.finishedPrograms / this.run.totalPrograms : 0;
    return this.totalRuns > 0 ? Math.min(1, (this.doneRuns + Math.min(within, 0.999)) / this.totalRuns) : 0;
  }

  private draw(force: boolean): void {
    const now = this.now();
    if (!this.sink.isTTY) {
      if (now - this.lastHeartbeatMs >= HEARTBEAT_MS) {
        this.lastHeartbeatMs = now;
        this.sink.write(`  … ${this.label}: ${this.run.finishedPrograms}/${this.run.totalPrograms} programs, ${duration(this.run.simMs)} simulated\n`);
      }
      return;
    }
    if (!force && now - this.lastDrawMs < TTY_INTERVAL_MS) return;
    this.lastDrawMs = now;
    const fraction = this.fraction();
    const filled = Math.round(fraction * BAR_WIDTH);
    const bar = `${"█".repeat(filled)}${"░".repeat(BAR_WIDTH - filled)}`;
    const line = `${bar} ${String(Math.floor(fraction * 100)).padStart(3)}%  run ${Math.min(this.doneRuns + 1, this.totalRuns)}/${this.totalRuns}  ${this.label}  ${this.run.finishedPrograms}/${this.run.totalPrograms} programs  ${duration(now - this.startedMs)}`;
    // A pseudo-terminal can report 0 columns.
    const columns = this.sink.columns !== undefined && this.sink.columns > 0 ? this.sink.columns : 120;
    this.sink.write(`\r\x1b[2K${line.slice(0, Math.max(20, columns - 1))}`);
    this.drawn = true;
  }
}
