import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ForwardFields, FORWARD_FIELD_ORDER, forwardHeaders, parseForwardHeaders, plainlyForwardFields } from "../../src/protocol/forward.js";
import { Header } from "../../src/protocol/headers.js";

/*
 * The forward fields as the pool reads them from the edge's headers: one zod parse of
 * ForwardFields, each number field in its wire form (decimal digits, an optional
 * fraction) and nothing else.
 */

const fields: ForwardFields = {
  tenant: "ten_1",
  program: "prog_1",
  thread: "main",
  call: "call_1",
  serviceMs: 12.5,
  pathMs: 0,
  waitMs: 3,
  engine: "",
  weight: 2,
  generation: 4,
  ts: 1_700_000_000_000,
};

const lookup = (headers: Record<string, string>) => ({ get: (name: string) => headers[name] ?? null });
const withHeader = (name: string, value: string | undefined) => {
  const headers = forwardHeaders(fields);
  if (value === undefined) delete headers[name];
  else headers[name] = value;
  return parseForwardHeaders(lookup(headers));
};

describe("parseForwardHeaders", () => {
  it("reads back what forwardHeaders wrote", () => {
    expect(parseForwardHeaders(lookup(forwardHeaders(fields)))).toEqual({ ok: true, fields });
  });

  it.each(["1e3", "-1", " 1", "1 ", "0x10", "1.", ".5", "", "Infinity", "NaN", "1,5", "9".repeat(400)])(
    "refuses a number field written %j",
    (value) => {
      expect(withHeader(Header.serviceMs, value)).toEqual({ ok: false, reason: "bad or missing serviceMs" });
      expect(withHeader(Header.ts, value)).toEqual({ ok: false, reason: "bad or missing ts" });
    },
  );

  it.each([
    [Header.weight, "0", "weight"],
    [Header.contextGeneration, "1.5", "generation"],
    [Header.ts, "17.5", "ts"],
    [Header.tenant, "", "tenant"],
    [Header.call, undefined, "call"],
    [Header.waitMs, undefined, "waitMs"],
  ])("refuses %s = %j (ForwardFields' own rules)", (name, value, field) => {
    expect(withHeader(name, value)).toEqual({ ok: false, reason: `bad or missing ${field}` });
  });

  it("accepts fractions, zero and an empty engine where ForwardFields does", () => {
    expect(withHeader(Header.pathMs, "0.25")).toMatchObject({ ok: true, fields: { pathMs: 0.25 } });
    expect(withHeader(Header.serviceMs, "0")).toMatchObject({ ok: true, fields: { serviceMs: 0 } });
    expect(withHeader(Header.engine, "")).toMatchObject({ ok: true, fields: { engine: "" } });
  });
});

describe("plainlyForwardFields (the header parse's check before zod)", () => {
  // Values of every kind a field can hold after the header parse, and the edges of each rule.
  const value = fc.oneof(
    fc.constant(undefined),
    fc.string({ maxLength: 4 }),
    fc.constantFrom("", "0", "1", "main"),
    fc.double(),
    fc.constantFrom(0, -0, 1, -1, 0.5, 1e-300, Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER + 1, 2 ** 60, Infinity, -Infinity, NaN, Number.MAX_VALUE),
    fc.integer(),
    fc.constantFrom(null, true, {}, []),
  );
  const record = fc.tuple(...FORWARD_FIELD_ORDER.map(() => value)).map((values) => Object.fromEntries(FORWARD_FIELD_ORDER.map((key, i) => [key, values[i]])));
  // Valid fields with one field changed: most generated records are refused by their first field.
  const nearlyValid = fc.tuple(fc.constantFrom(...FORWARD_FIELD_ORDER), value).map(([key, v]): Record<string, unknown> => ({ ...fields, [key]: v }));

  it("accepts exactly what ForwardFields accepts, and then raw is zod's output", () => {
    fc.assert(
      fc.property(fc.oneof(record, nearlyValid), (raw) => {
        const parsed = ForwardFields.safeParse(raw);
        expect(plainlyForwardFields(raw)).toBe(parsed.success);
        if (parsed.success) expect(parsed.data).toEqual(raw);
      }),
      { numRuns: 20_000 },
    );
  });

  it("accepts valid fields, and refuses each rule's edge", () => {
    expect(plainlyForwardFields(fields)).toBe(true);
    for (const [key, bad] of [
      ["tenant", ""],
      ["engine", undefined],
      ["serviceMs", Infinity],
      ["pathMs", -1],
      ["waitMs", NaN],
      ["weight", 0],
      ["generation", 1.5],
      ["ts", Number.MAX_SAFE_INTEGER + 1],
      ["ts", -1],
    ] as const) {
      expect(plainlyForwardFields({ ...fields, [key]: bad }), `${key} = ${String(bad)}`).toBe(false);
      expect(ForwardFields.safeParse({ ...fields, [key]: bad }).success).toBe(false);
    }
  });
});
