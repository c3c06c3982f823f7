/**
 * A Durable Object's one alarm, driving everything it has scheduled: `moveTo` gets the
 * earliest due time of all of it. The alarm only moves earlier, never later, between
 * runs: a later due time is found when the earlier alarm fires and schedules again, which
 * saves a storage write per call that leaves the next due time where it was.
 */
export class AlarmSchedule {
  #at: number | null = null;

  constructor(private readonly storage: DurableObjectStorage) {}

  /** Reads the stored alarm (in the object's blockConcurrencyWhile). */
  async load(): Promise<void> {
    this.#at = await this.storage.getAlarm();
  }

  /** The alarm fired, or the object's storage is being wiped: no alarm is known to be set. */
  forget(): void {
    this.#at = null;
  }

  /** Due at `next` (null: nothing is due, and the alarm is deleted). */
  async moveTo(next: number | null): Promise<void> {
    if (next === null) {
      if (this.#at === null) return;
      await this.storage.deleteAlarm();
    } else {
      if (this.#at !== null && this.#at <= next) return;
      await this.storage.setAlarm(next);
    }
    this.#at = next;
  }

  /** Deletes the alarm whatever is known of it. */
  async clear(): Promise<void> {
    await this.storage.deleteAlarm();
    this.#at = null;
  }
}
