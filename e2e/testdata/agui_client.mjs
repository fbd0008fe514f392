// The official AG-UI client (@ag-ui/client's HttpAgent, pinned in
// .ci/npm) against desk's AG-UI door, for TestAGUIClient. Every frame desk
// sends is also checked against @ag-ui/core's EventSchema. It runs a turn
// that streams text and asks to run a command (the run ends with an
// interrupt), resumes the run with an approval, drops the connection in
// the middle of the resumed run's text, re-subscribes with Last-Event-ID
// (through the client's connectAgent), and finally reads the whole run
// once more from its start to compare. It prints what it saw as one JSON
// object. Environment: DESK_URL, DESK_TOKEN, DESK_SES, DESK_NPM_BIN.
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const nodeModules = path.dirname(process.env.DESK_NPM_BIN);
const require = createRequire(path.join(nodeModules, "noop.js"));
const client = await import(pathToFileURL(require.resolve("@ag-ui/client")).href);
const core = await import(pathToFileURL(require.resolve("@ag-ui/core/schemas")).href);
const { HttpAgent, transformHttpEventStream, runHttpRequest } = client;
const { EventSchema } = core;

const url = `${process.env.DESK_URL}/v1/sessions/${process.env.DESK_SES}/agui`;
const auth = { Authorization: `Bearer ${process.env.DESK_TOKEN}` };
const out = { invalid: [], runs: {} };
// readers are the recorders of the responses so far; settle() waits for
// them, since the client may finish reading before the recorder does.
const readers = [];
const settle = () => Promise.all(readers.splice(0));

// frames records every SSE frame of a response as {id, event}, checking
// each against the schema, while the client reads the same bytes.
function recordingFetch(frames, onFrame) {
  return async (u, init) => {
    const res = await fetch(u, init);
    if (!res.ok || !res.body) return res;
    const [mine, theirs] = res.body.tee();
    readers.push((async () => {
      const dec = new TextDecoder();
      let buf = "";
      try {
        for await (const chunk of mine) {
          buf += dec.decode(chunk, { stream: true });
          let i;
          while ((i = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, i);
            buf = buf.slice(i + 2);
            let id = null;
            let data = "";
            for (const line of block.split("\n")) {
              if (line.startsWith("id: ")) id = Number(line.slice(4));
              if (line.startsWith("data: ")) data += line.slice(6);
            }
            if (!data) continue;
            const ev = JSON.parse(data);
            const ok = EventSchema.safeParse(ev);
            if (!ok.success) out.invalid.push({ ev, error: String(ok.error).slice(0, 300) });
            frames.push({ id, ev });
            onFrame?.(frames.at(-1));
          }
        }
      } catch (e) {
        // The connection was dropped on purpose; anything else is a
        // failure of the recorder itself.
        if (e?.name !== "AbortError") out.recorderErrors = [...(out.recorderErrors ?? []), String(e)];
      }
    })());
    return new Response(theirs, { status: res.status, headers: res.headers });
  };
}

// DeskAgent re-subscribes to a run with AG-UI's connectAgent: the same
// RunAgentInput, with Last-Event-ID saying what the client has.
class DeskAgent extends HttpAgent {
  constructor(opts, lastEventId) {
    super(opts);
    this.lastEventId = lastEventId;
  }
  connect(input) {
    const init = this.requestInit(input);
    init.headers = { ...init.headers, "Last-Event-ID": String(this.lastEventId) };
    return transformHttpEventStream(runHttpRequest(() => this.fetch(this.url, init)), this.debugLogger);
  }
}

function summary(frames) {
  const types = frames.map((f) => f.ev.type);
  const text = frames.filter((f) => f.ev.type === "TEXT_MESSAGE_CHUNK").map((f) => f.ev.delta ?? "").join("");
  const args = frames.filter((f) => f.ev.type === "TOOL_CALL_CHUNK").map((f) => f.ev.delta ?? "").join("");
  const tools = [...new Set(frames.filter((f) => f.ev.type === "TOOL_CALL_CHUNK").map((f) => f.ev.toolCallName))];
  const results = frames.filter((f) => f.ev.type === "TOOL_CALL_RESULT").map((f) => f.ev.content);
  const finished = frames.filter((f) => f.ev.type === "RUN_FINISHED").map((f) => f.ev.outcome);
  return { types, text, args, tools, results, finished };
}

// Run 1: the prompt. It streams text and a command call, and ends with
// an interrupt: the command waits for approval.
const f1 = [];
const a1 = new HttpAgent({ url, headers: auth, threadId: process.env.DESK_SES, fetch: recordingFetch(f1) });
a1.addMessage({ id: "u1", role: "user", content: "run it" });
await a1.runAgent({ runId: "run-1" });
await settle();
out.runs.first = summary(f1);
out.pending = a1.pendingInterrupts.map((i) => ({ id: i.id, reason: i.reason, message: i.message, options: i.metadata?.desk?.options?.length ?? 0 }));

// A repeated runId is the same run: nothing is submitted again.
const f1b = [];
const a1b = new HttpAgent({ url, headers: auth, threadId: process.env.DESK_SES, fetch: recordingFetch(f1b) });
a1b.addMessage({ id: "u1", role: "user", content: "run it" });
await a1b.runAgent({ runId: "run-1" });
await settle();
out.runs.repeated = summary(f1b);

// Run 2: resume with the approval; drop the connection after the third
// piece of text.
const resume = [{ interruptId: a1.pendingInterrupts[0].id, status: "resolved", payload: { decision: "approve", reason: "the AG-UI client says yes" } }];
const f2 = [];
let dropped = false;
const a2 = new HttpAgent({
  url, headers: auth, threadId: process.env.DESK_SES,
  fetch: recordingFetch(f2, (f) => {
    if (!dropped && f.ev.type === "TEXT_MESSAGE_CHUNK" && f2.filter((x) => x.ev.type === "TEXT_MESSAGE_CHUNK").length === 3) {
      dropped = true;
      a2.abortRun();
    }
  }),
});
a2.messages = structuredClone(a1.messages);
try {
  await a2.runAgent({ runId: "run-2", resume });
} catch (e) {
  out.abortError = String(e);
}
// The recorder may have read further than the client: the client has
// what the recorder has, so its last id is where to continue.
await settle();
const lastId = f2.filter((f) => f.id).at(-1)?.id ?? 0;
out.dropped = dropped;
out.lastId = lastId;

// Re-subscribe with connectAgent and Last-Event-ID.
const f3 = [];
const a3 = new DeskAgent({ url, headers: auth, threadId: process.env.DESK_SES, fetch: recordingFetch(f3) }, lastId);
a3.messages = structuredClone(a1.messages);
await a3.connectAgent({ runId: "run-2", resume });
await settle();
out.runs.resumedBefore = summary(f2);
out.runs.resumedAfter = summary(f3);

// The whole run once more from its start: what the two connections
// carried between them must be exactly this.
const f4 = [];
const a4 = new HttpAgent({ url, headers: auth, threadId: process.env.DESK_SES, fetch: recordingFetch(f4) });
a4.messages = structuredClone(a1.messages);
await a4.runAgent({ runId: "run-2", resume });
await settle();
const key = (f) => `${f.id}|${JSON.stringify(f.ev)}`;
const joined = [...f2.filter((f) => f.id && f.id <= lastId), ...f3.filter((f) => f.id)].map(key);
const whole = f4.filter((f) => f.id).map(key);
out.joinedEqualsWhole = JSON.stringify(joined) === JSON.stringify(whole);
out.joinedCount = joined.length;
out.wholeCount = whole.length;
out.duplicates = joined.length - new Set(joined).size;
out.runs.whole = summary(f4);
out.clientText = a3.messages.filter((m) => m.role === "assistant").map((m) => m.content ?? "").join("|");

// A plan card waiting for review is an interrupt too (session DESK_SES2).
const url2 = `${process.env.DESK_URL}/v1/sessions/${process.env.DESK_SES2}/agui`;
const f5 = [];
const a5 = new HttpAgent({ url: url2, headers: auth, threadId: process.env.DESK_SES2, fetch: recordingFetch(f5) });
a5.addMessage({ id: "p1", role: "user", content: "plan it" });
await a5.runAgent({ runId: "plan-1" });
await settle();
out.plan = { first: summary(f5), pending: a5.pendingInterrupts.map((i) => ({ id: i.id, reason: i.reason, message: i.message })) };
const f6 = [];
const a6 = new HttpAgent({ url: url2, headers: auth, threadId: process.env.DESK_SES2, fetch: recordingFetch(f6) });
a6.messages = structuredClone(a5.messages);
a6.pendingInterrupts = structuredClone(a5.pendingInterrupts);
await a6.runAgent({ runId: "plan-2", resume: [{ interruptId: a5.pendingInterrupts[0].id, status: "resolved", payload: { decision: "approve" } }] });
await settle();
out.plan.resumed = summary(f6);

// Bad input: an interrupt desk did not raise.
const bad = await fetch(url, {
  method: "POST", headers: { ...auth, "Content-Type": "application/json", Accept: "text/event-stream" },
  body: JSON.stringify({ threadId: process.env.DESK_SES, runId: "run-bad", messages: [], resume: [{ interruptId: "approval:apv_nothere:1", status: "resolved", payload: { decision: "approve" } }] }),
});
out.bad = { status: bad.status, body: await bad.json() };
process.stdout.write(JSON.stringify(out) + "\n");
