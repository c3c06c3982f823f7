/** The command line was wrong: exit 2, with a hint. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

/** The edge answered with an error: exit 1, showing its OpenAI error message. */
export class AdminHttpError extends Error {
  override readonly name = "AdminHttpError";
  constructor(
    readonly status: number,
    readonly code: string | null,
    message: string,
  ) {
    super(message);
  }
}

/** The edge could not be reached at all: exit 1. */
export class ConnectionError extends Error {
  override readonly name = "ConnectionError";
}
