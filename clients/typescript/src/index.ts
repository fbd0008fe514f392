// The typed client of desk's HTTP API. Every path, parameter and body type
// comes from desk's OpenAPI document (src/schema.d.ts, generated); calls go
// through openapi-fetch. By hand: the bearer token, the event stream with
// resume, and small helpers for the calls a program makes around a turn.
import createClient, { type Client, type Middleware } from "openapi-fetch";
import type { components, paths } from "./schema.js";

export type { components, paths } from "./schema.js";
export type Schemas = components["schemas"];
export type DeskEvent = Schemas["Event"];

export interface DeskOptions {
  /** The server, e.g. http://127.0.0.1:7070 (no trailing /v1). */
  baseUrl: string;
  /** The admin token or an actor token. */
  token: string;
  /** A fetch to use instead of the global one. */
  fetch?: typeof fetch;
}

/** The typed API: `desk.api.GET("/v1/sessions/{ses}", …)` and so on. */
export type DeskAPI = Client<paths>;

/** An error answer of desk: its code (invalid, not_found, …) and message. */
export class DeskError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(`${status} ${code}: ${message}`);
    this.name = "DeskError";
  }
}

export class Desk {
  readonly api: DeskAPI;
  private readonly opts: DeskOptions;

  constructor(opts: DeskOptions) {
    this.opts = opts;
    this.api = createClient<paths>({ baseUrl: opts.baseUrl, fetch: opts.fetch });
    const auth: Middleware = {
      onRequest({ request }) {
        request.headers.set("Authorization", `Bearer ${opts.token}`);
        return request;
      },
    };
    this.api.use(auth);
  }

  /** Creates a session in workspace ws. */
  async createSession(ws: string, body: Schemas["SessionCreate"]): Promise<Schemas["Session"]> {
    return must(await this.api.POST("/v1/workspaces/{ws}/sessions", { params: { path: { ws } }, body }));
  }

  /** Queues a message on a session; the result names the execution when it started at once. */
  async send(ses: string, body: Schemas["MessageSubmit"]): Promise<Schemas["SubmitResult"]> {
    return must(await this.api.POST("/v1/sessions/{ses}/messages", { params: { path: { ses } }, body }));
  }

  /** Decides an approval request. */
  async decideApproval(id: string, body: Schemas["ApprovalDecision"]): Promise<Schemas["Approval"]> {
    return must(await this.api.POST("/v1/approvals/{apr}", { params: { path: { apr: id } }, body }));
  }

  /**
   * Follows the live event log (GET /v1/events) from after `after`,
   * reconnecting with Last-Event-ID when the connection drops, so no event
   * is lost or repeated. It ends when `until` returns true for an event or
   * the signal aborts. A `gap` (the events asked for left the retention
   * window) throws, naming the oldest id still kept.
   */
  async follow(
    filter: { session?: string; workspace?: string; execution?: string; after?: number; signal?: AbortSignal },
    until: (e: DeskEvent) => boolean | void,
  ): Promise<number> {
    let last = filter.after ?? 0;
    const doFetch = this.opts.fetch ?? fetch;
    for (;;) {
      const q = new URLSearchParams();
      if (filter.session) q.set("session", filter.session);
      if (filter.workspace) q.set("workspace", filter.workspace);
      if (filter.execution) q.set("execution", filter.execution);
      let res: Response;
      try {
        res = await doFetch(`${this.opts.baseUrl}/v1/events?${q}`, {
          headers: { Authorization: `Bearer ${this.opts.token}`, Accept: "text/event-stream", "Last-Event-ID": String(last) },
          signal: filter.signal,
        });
      } catch (err) {
        if (filter.signal?.aborted) return last;
        throw err;
      }
      if (!res.ok || !res.body) {
        throw await errorOf(res);
      }
      try {
        for await (const frame of frames(res.body)) {
          if (frame.event === "gap") {
            throw new DeskError(410, "gap", `events after ${last} are no longer kept: ${frame.data}`);
          }
          if (!frame.data) continue; // keep-alive
          const e = JSON.parse(frame.data) as DeskEvent;
          if (e.seq <= last) continue; // already seen before a reconnect
          last = e.seq;
          if (until(e)) {
            await res.body.cancel().catch(() => {});
            return last;
          }
        }
      } catch (err) {
        if (err instanceof DeskError) throw err;
        if (filter.signal?.aborted) return last;
        // The connection dropped: resume after the last event seen.
      }
    }
  }
}

/** The data of a successful openapi-fetch answer, or a DeskError. */
function must<T>(r: { data?: T; error?: unknown; response: Response }): T {
  if (r.data !== undefined) return r.data;
  const e = (r.error ?? {}) as { error?: { code?: string; message?: string } };
  throw new DeskError(r.response.status, e.error?.code ?? "unknown", e.error?.message ?? r.response.statusText);
}

async function errorOf(res: Response): Promise<DeskError> {
  try {
    const b = (await res.json()) as { error?: { code?: string; message?: string } };
    return new DeskError(res.status, b.error?.code ?? "unknown", b.error?.message ?? res.statusText);
  } catch {
    return new DeskError(res.status, "unknown", res.statusText);
  }
}

interface Frame {
  id?: string;
  event: string;
  data: string;
}

/** Server-sent event frames of a response body. */
async function* frames(body: ReadableStream<Uint8Array>): AsyncGenerator<Frame> {
  const dec = new TextDecoder();
  let buf = "";
  let cur: Frame = { event: "message", data: "" };
  let lines: string[] = [];
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    buf += dec.decode(chunk, { stream: true });
    let i: number;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i).replace(/\r$/, "");
      buf = buf.slice(i + 1);
      if (line === "") {
        if (lines.length > 0 || cur.id !== undefined) {
          cur.data = lines.join("\n");
          yield cur;
        }
        cur = { event: "message", data: "" };
        lines = [];
        continue;
      }
      if (line.startsWith(":")) continue;
      const c = line.indexOf(":");
      const field = c < 0 ? line : line.slice(0, c);
      const value = c < 0 ? "" : line.slice(c + 1).replace(/^ /, "");
      if (field === "data") lines.push(value);
      else if (field === "event") cur.event = value;
      else if (field === "id") cur.id = value;
    }
  }
}
