/**
 * crm.deal.get / list / update on the emulator over HTTP: documented shapes (UPPER_SNAKE, strings, money with two
 * decimals, dates with offset), the empty-code errors, stage consequences, scope `crm`, and the shared write
 * machinery (faults, call log, Idempotency-Key replay, rate limit) on crm.deal.update.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { EmulatorControl, startEmulator, type RunningEmulator } from "../src/offline-demo/emulator/index.js";

let emu: RunningEmulator;
let control: EmulatorControl;

async function call(
  method: string,
  params: Record<string, unknown> = {},
  headers: Record<string, string> = {},
  on: RunningEmulator = emu,
) {
  const res = await fetch(on.webhookUrl + method, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(params),
  });
  return {
    status: res.status,
    body: (await res.json()) as any,
    replayed: res.headers.get("idempotent-replayed"),
  };
}

beforeAll(async () => {
  emu = await startEmulator({ rate: 0 });
  control = new EmulatorControl(emu.baseUrl);
});
afterAll(() => emu.close());
beforeEach(() => control.reset());

const ISO_WITH_OFFSET = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+03:00$/;

describe("crm.deal.get", () => {
  it("returns the deal in the recorded shape: UPPER_SNAKE keys, string values, money with two decimals", async () => {
    const { status, body } = await call("crm.deal.get", { id: 1 });
    expect(status).toBe(200);
    const deal = body.result;
    expect(deal).toMatchObject({
      ID: "1",
      TITLE: "Office chairs for the Kazan branch",
      TYPE_ID: "GOODS",
      STAGE_ID: "NEW",
      PROBABILITY: "20",
      CURRENCY_ID: "RUB",
      OPPORTUNITY: "5000.00",
      IS_MANUAL_OPPORTUNITY: "N",
      TAX_VALUE: null,
      COMPANY_ID: "1",
      CONTACT_ID: "3",
      ASSIGNED_BY_ID: "7",
      CREATED_BY_ID: "2",
      MODIFY_BY_ID: "2",
      OPENED: "Y",
      CLOSED: "N",
      CATEGORY_ID: "0",
      STAGE_SEMANTIC_ID: "P",
      COMMENTS: null,
    });
    for (const k of [
      "DATE_CREATE",
      "DATE_MODIFY",
      "BEGINDATE",
      "CLOSEDATE",
      "MOVED_TIME",
      "LAST_ACTIVITY_TIME",
    ])
      expect(deal[k]).toMatch(ISO_WITH_OFFSET);
    expect(Object.keys(deal).slice(0, 7)).toEqual([
      "ID",
      "TITLE",
      "TYPE_ID",
      "STAGE_ID",
      "PROBABILITY",
      "CURRENCY_ID",
      "OPPORTUNITY",
    ]);
    expect((await call("crm.deal.get", { id: 3 })).body.result.OPPORTUNITY).toBe("48500.50");
  });

  it("accepts ID as well as id, and answers the documented errors with an empty code", async () => {
    expect((await call("crm.deal.get", { ID: 2 })).body.result.ID).toBe("2");
    expect(await call("crm.deal.get", { id: 99 })).toMatchObject({
      status: 400,
      body: { error: "", error_description: "Not found" },
    });
    expect(await call("crm.deal.get", {})).toMatchObject({
      status: 400,
      body: { error: "", error_description: "ID is not defined or invalid" },
    });
    expect(await call("crm.deal.get", { id: "abc" })).toMatchObject({
      status: 400,
      body: { error: "", error_description: "ID is not defined or invalid" },
    });
    expect(await call("crm.deal.get", { id: -1 })).toMatchObject({
      status: 400,
      body: { error: "", error_description: "ID is not defined or invalid" },
    });
  });

  it("needs scope crm: 403 insufficient_scope without it", async () => {
    const noCrm = await startEmulator({ rate: 0, scopes: ["task", "user"] });
    try {
      for (const [method, params] of [
        ["crm.deal.get", { id: 1 }],
        ["crm.deal.list", {}],
        ["crm.deal.update", { id: 1, fields: { TITLE: "x" } }],
      ] as const) {
        expect(await call(method, params, {}, noCrm)).toMatchObject({
          status: 403,
          body: {
            error: "insufficient_scope",
            error_description: "The request requires higher privileges than provided by the webhook token",
          },
        });
      }
      expect((await call("scope", {}, {}, noCrm)).body.result).toEqual(["task", "user"]);
    } finally {
      await noCrm.close();
    }
    expect((await call("scope")).body.result).toEqual(["task", "user", "crm"]);
  });
});

describe("crm.deal.list", () => {
  it("lists readable deals by ID ascending with total, filters with prefixes and narrows by select", async () => {
    const all = await call("crm.deal.list");
    expect(all.status).toBe(200);
    expect(all.body.result.map((d: { ID: string }) => d.ID)).toEqual(["1", "2", "3", "4"]);
    expect(all.body.total).toBe(4);
    expect(all.body.next).toBeUndefined();

    const byStage = await call("crm.deal.list", {
      filter: { STAGE_ID: "NEW" },
      select: ["ID", "TITLE", "STAGE_ID"],
    });
    expect(byStage.body.result).toEqual([
      { ID: "1", TITLE: "Office chairs for the Kazan branch", STAGE_ID: "NEW" },
      { ID: "4", TITLE: "Payroll software licences", STAGE_ID: "NEW" },
    ]);
    const rich = await call("crm.deal.list", {
      filter: { ">OPPORTUNITY": 10000, "@ASSIGNED_BY_ID": [2, 5] },
      order: { OPPORTUNITY: "DESC" },
      select: ["OPPORTUNITY"],
    });
    expect(rich.body.result).toEqual([
      { ID: "2", OPPORTUNITY: "120000.00" },
      { ID: "3", OPPORTUNITY: "48500.50" },
    ]);
    const like = await call("crm.deal.list", { FILTER: { "%TITLE": "bound deal" }, SELECT: ["ID"] });
    expect(like.body.result).toEqual([{ ID: "3" }]);
    const dates = await call("crm.deal.list", { filter: { ">=DATE_CREATE": "2026-11-16" }, select: ["ID"] });
    expect(dates.body.result.map((d: { ID: string }) => d.ID)).toEqual(["3", "4"]);
  });

  it("pages 50 at a time with start and next", async () => {
    const users = [{ id: 1, name: "A", login: "a" }];
    const deals = Array.from({ length: 60 }, (_, i) => ({
      id: i + 1,
      title: `Deal ${i + 1}`,
      assignedById: 1,
      createdById: 1,
      dateCreate: "2026-11-01T10:00:00+03:00",
      dateModify: "2026-11-01T10:00:00+03:00",
    }));
    const big = await startEmulator({ rate: 0, seed: { users, deals } });
    try {
      const first = await call("crm.deal.list", { select: ["ID"] }, {}, big);
      expect(first.body.result).toHaveLength(50);
      expect(first.body).toMatchObject({ total: 60, next: 50 });
      const second = await call("crm.deal.list", { select: ["ID"], start: 50 }, {}, big);
      expect(second.body.result.map((d: { ID: string }) => d.ID)).toEqual(
        Array.from({ length: 10 }, (_, i) => String(51 + i)),
      );
      expect(second.body.next).toBeUndefined();
    } finally {
      await big.close();
    }
  });

  it("leaves out deals the webhook user cannot read", async () => {
    const asIvan = await startEmulator({ rate: 0, userId: 2 });
    try {
      expect(
        (await call("crm.deal.list", { select: ["ID"] }, {}, asIvan)).body.result.map(
          (d: { ID: string }) => d.ID,
        ),
      ).toEqual(["1", "2", "3"]);
      expect(await call("crm.deal.get", { id: 4 }, {}, asIvan)).toMatchObject({
        status: 400,
        body: { error: "", error_description: "Access denied" },
      });
    } finally {
      await asIvan.close();
    }
  });
});

describe("crm.deal.update", () => {
  it("answers {result: true}, changes only the given fields, ignores unknown ones and moves DATE_MODIFY / MODIFY_BY_ID", async () => {
    const before = (await call("crm.deal.get", { id: 3 })).body.result;
    const res = await call("crm.deal.update", {
      id: 3,
      fields: { TITLE: "Renamed deal", OPPORTUNITY: "51000", UF_CRM_UNKNOWN: "x", NOT_A_FIELD: 1 },
      params: { REGISTER_SONET_EVENT: "N" },
    });
    expect(res.status).toBe(200);
    expect(res.body.result).toBe(true);
    expect(Object.keys(res.body).sort()).toEqual(["result", "time"]);
    const after = (await call("crm.deal.get", { id: 3 })).body.result;
    expect(after).toMatchObject({
      TITLE: "Renamed deal",
      OPPORTUNITY: "51000.00",
      MODIFY_BY_ID: "1",
      STAGE_ID: "EXECUTING",
    });
    expect(after.DATE_MODIFY).not.toBe(before.DATE_MODIFY);
    expect(after.DATE_MODIFY).toMatch(ISO_WITH_OFFSET);
    expect(after).not.toHaveProperty("UF_CRM_UNKNOWN");
    expect(after.ASSIGNED_BY_ID).toBe(before.ASSIGNED_BY_ID);
  });

  it("derives STAGE_SEMANTIC_ID and CLOSED from the stage: WON -> S/Y, LOSE -> F/Y, others -> P/N", async () => {
    const stage = async (s: string) => {
      expect((await call("crm.deal.update", { id: 1, fields: { STAGE_ID: s } })).body.result).toBe(true);
      const d = (await call("crm.deal.get", { id: 1 })).body.result;
      return [d.STAGE_ID, d.STAGE_SEMANTIC_ID, d.CLOSED, d.MOVED_BY_ID];
    };
    expect(await stage("WON")).toEqual(["WON", "S", "Y", "1"]);
    expect(await stage("LOSE")).toEqual(["LOSE", "F", "Y", "1"]);
    expect(await stage("PREPARATION")).toEqual(["PREPARATION", "P", "N", "1"]);
  });

  it("answers the documented errors with an empty code and changes nothing", async () => {
    const err = (description: string) => ({
      status: 400,
      body: { error: "", error_description: description },
    });
    expect(await call("crm.deal.update", { id: 99, fields: { TITLE: "x" } })).toMatchObject(err("Not found"));
    expect(await call("crm.deal.update", { fields: { TITLE: "x" } })).toMatchObject(
      err("ID is not defined or invalid"),
    );
    expect(await call("crm.deal.update", { id: 0, fields: { TITLE: "x" } })).toMatchObject(
      err("ID is not defined or invalid"),
    );
    expect(await call("crm.deal.update", { id: 1, fields: "TITLE" })).toMatchObject(
      err("Parameter 'fields' must be array"),
    );
    expect(await call("crm.deal.update", { id: 1 })).toMatchObject(err("Parameter 'fields' must be array"));
    expect(await call("crm.deal.update", { id: 1, fields: { TITLE: "x" }, params: "Y" })).toMatchObject(
      err("Parameter 'params' must be array"),
    );
    expect(await call("crm.deal.update", { id: 1, fields: { CURRENCY_ID: "XYZ" } })).toMatchObject(
      err('Invalid value for the "Currency" field'),
    );
    expect(await call("crm.deal.update", { id: 4, fields: { TITLE: "x" } })).toMatchObject(
      err("Access denied"),
    );
    expect((await call("crm.deal.get", { id: 1 })).body.result.TITLE).toBe(
      "Office chairs for the Kazan branch",
    );
  });

  it("goes through the call log and the faults: apply_then_timeout applies once, ack_without_apply applies nothing", async () => {
    await control.armFault({ method: "crm.deal.update", kind: "apply_then_timeout" });
    const lost = await fetch(emu.webhookUrl + "crm.deal.update", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ id: 2, fields: { TITLE: "Applied, answer lost" } }),
      signal: AbortSignal.timeout(500),
    }).then(
      () => "answered",
      () => "timed out",
    );
    expect(lost).toBe("timed out");
    const log = await control.calls({ method: "crm.deal.update" });
    expect(log).toHaveLength(1);
    expect(log[0]).toMatchObject({ status: 0, fault: "apply_then_timeout" });
    expect((await call("crm.deal.get", { id: 2 })).body.result.TITLE).toBe("Applied, answer lost");

    await control.armFault({ method: "crm.deal.update", kind: "ack_without_apply" });
    expect(
      (await call("crm.deal.update", { id: 2, fields: { TITLE: "Only acknowledged" } })).body.result,
    ).toBe(true);
    expect((await call("crm.deal.get", { id: 2 })).body.result.TITLE).toBe("Applied, answer lost");
  });

  it("replays an Idempotency-Key: the same key and body is not carried out again; another body is refused 422", async () => {
    const key = { "idempotency-key": "deal-key-0001" };
    const first = await call("crm.deal.update", { id: 1, fields: { TITLE: "Once" } }, key);
    expect(first).toMatchObject({ status: 200, replayed: null });
    await call("crm.deal.update", { id: 1, fields: { TITLE: "Changed in between" } });
    const again = await call("crm.deal.update", { id: 1, fields: { TITLE: "Once" } }, key);
    expect(again).toMatchObject({ status: 200, replayed: "true", body: { result: true } });
    expect((await call("crm.deal.get", { id: 1 })).body.result.TITLE).toBe("Changed in between");
    expect((await call("crm.deal.update", { id: 1, fields: { TITLE: "Other" } }, key)).status).toBe(422);
    const faults = (await control.calls({ method: "crm.deal.update" })).map((c) => c.fault ?? null);
    expect(faults).toEqual([null, null, "idempotent_replay", "idempotency_conflict"]);
  });

  it("shares the portal's rate limit", async () => {
    const limited = await startEmulator({ rate: 0.001, burst: 2 });
    try {
      expect((await call("crm.deal.update", { id: 1, fields: { TITLE: "a" } }, {}, limited)).status).toBe(
        200,
      );
      expect((await call("crm.deal.get", { id: 1 }, {}, limited)).status).toBe(200);
      expect(await call("crm.deal.update", { id: 1, fields: { TITLE: "b" } }, {}, limited)).toMatchObject({
        status: 503,
        body: { error: "QUERY_LIMIT_EXCEEDED" },
      });
    } finally {
      await limited.close();
    }
  });
});
