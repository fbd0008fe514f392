// A program using desk's generated TypeScript client (clients/typescript),
// compiled by the Go test TestTypeScriptClient: it creates a session, sends
// a message, follows the event stream until the gated command asks for an
// approval, approves it, follows on to the reply, and prints what it saw as
// one JSON object. Environment: DESK_URL, DESK_TOKEN, DESK_WS.
import { Desk, DeskError } from "./dist/index.js";

const desk = new Desk({ baseUrl: process.env.DESK_URL, token: process.env.DESK_TOKEN });
const out = { events: [] };

const ses = await desk.createSession(process.env.DESK_WS, {
  title: "from TypeScript",
  model: "script",
  script: { steps: [
    { tool_calls: [{ name: "exec_command", arguments: { command: "echo from-typescript" } }] },
    { text: "It ran, said the script." },
  ] },
});
out.session = ses.id;
const sent = await desk.send(ses.id, { text: "run it" });
out.execution = sent.execution_id ?? null;

const signal = AbortSignal.timeout(60000);
let approved = null;
await desk.follow({ session: ses.id, after: sent.events_after, signal }, (e) => {
  out.events.push(e.type);
  return e.type === "approval.requested";
});
const { data: aps } = await desk.api.GET("/v1/sessions/{ses}/approvals", { params: { path: { ses: ses.id } } });
const pending = (aps?.approvals ?? []).filter((a) => a.status === "pending");
out.pending = pending.length;
approved = await desk.decideApproval(pending[0].id, { decision: "approve", reason: "typescript says yes" });
out.approvalStatus = approved.status;

let last = 0;
await desk.follow({ session: ses.id, after: sent.events_after, signal }, (e) => {
  last = e.seq;
  return e.type === "execution.ended" || e.type === "execution.failed";
});
const { data: msgs } = await desk.api.GET("/v1/sessions/{ses}/messages", { params: { path: { ses: ses.id } } });
out.reply = (msgs?.messages ?? []).filter((m) => m.role === "assistant" && m.text).map((m) => m.text).join("|");

// A bad request is a typed error with desk's code.
try {
  await desk.send("ses_nothere", { text: "x" });
  out.badSession = "accepted";
} catch (e) {
  out.badSession = e instanceof DeskError ? `${e.status} ${e.code}` : String(e);
}
process.stdout.write(JSON.stringify(out) + "\n");
