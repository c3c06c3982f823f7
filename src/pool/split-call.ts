import { BootstrapSplit } from "./bootstrap-split.js";
import { KvTransferSplit } from "./kv-transfer-split.js";
import type { EngineSlot, PendingCall } from "./pending-call.js";
import type { SplitCallHost } from "./split-call-host.js";
import { SplitLegs } from "./split-legs.js";

/*
 * Disaggregated calls (issue 13): a call placed on a prefill engine of a kind that
 * splits is driven the way that engine's own disaggregated serving does it, vLLM's
 * two steps (kv-transfer-split.ts) or SGLang's bootstrap (bootstrap-split.ts), with
 * the legs' ends and failures handled alike (split-legs.ts).
 */

export class SplitCalls {
  readonly #host: SplitCallHost;
  readonly #kvTransfer: KvTransferSplit;
  readonly #bootstrap: BootstrapSplit;

  constructor(host: SplitCallHost) {
    this.#host = host;
    const legs = new SplitLegs(host);
    this.#kvTransfer = new KvTransferSplit(host, legs);
    this.#bootstrap = new BootstrapSplit(host, legs);
  }

  /** Starts the call split when its engine is a prefill engine of a kind that splits; false when it is to be served whole. */
  start(pending: PendingCall, engineId: string, slot: EngineSlot, now: number): boolean {
    const split = slot.target.adapter.split;
    if (split === undefined || this.#host.core.roles.role(engineId) !== "prefill") return false;
    if (split === "kv-transfer-params") this.#kvTransfer.start(pending, engineId, slot, now);
    else this.#bootstrap.start(pending, engineId, slot, now);
    return true;
  }

  /** Held decodes asked again (kv-transfer-split.ts): at every pump, and once more when the pool closes. */
  retryHeldDecodes(): void {
    this.#kvTransfer.retryHeld();
  }

  /** The client of a call left: a held decode leaves at once (kv-transfer-split.ts leaveHeld); false when the call's decode is not held. */
  leaveHeldDecode(pending: PendingCall): boolean {
    return this.#kvTransfer.leaveHeld(pending);
  }

  /** Prefilled calls waiting for a decode engine to admit them. */
  get heldDecodes(): number {
    return this.#kvTransfer.heldCount;
  }
}
