// An ACP client built on the official TypeScript SDK
// (@agentclientprotocol/sdk), driving `desk acp` the way an editor does.
// The Go test TestACPAgentTypeScriptClient runs it; it prints one JSON
// object on stdout with what it saw, and the test asserts on that.
//
//   node acp_client.mjs first        new → prompt (permission answered) → cancel of a second prompt
//   node acp_client.mjs load SES     load of SES in this fresh process, the transcript replayed
//   node acp_client.mjs resume SES   list (SES is there), resume SES (no replay), prompt it,
//                                    close it, then a prompt on it is refused
//
// Environment: DESK_NPM_BIN (the SDK is found in its parent node_modules),
// ACP_AGENT (the agent's argv as a JSON array), ACP_OPTION (the option id
// to answer a permission request with).
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import path from "node:path";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const nodeModules = path.dirname(process.env.DESK_NPM_BIN);
const require = createRequire(path.join(nodeModules, "noop.js"));
const acp = await import(pathToFileURL(require.resolve("@agentclientprotocol/sdk")).href);

const [mode, loadID] = process.argv.slice(2);
const argv = JSON.parse(process.env.ACP_AGENT);
const child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

const out = { updates: [], permissions: [] };
let onUpdate = () => {};

const app = acp.client({ name: "desk-acp-test" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    out.updates.push(params.update);
    onUpdate(params.update);
  })
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    out.permissions.push({ title: params.toolCall.title, toolCallId: params.toolCall.toolCallId, options: params.options.map((o) => o.optionId + ":" + o.kind) });
    return { outcome: { outcome: "selected", optionId: process.env.ACP_OPTION || "approve" } };
  });

function timeout(ms, what) {
  return new Promise((_, reject) => setTimeout(() => reject(new Error("timed out: " + what)), ms));
}

await app.connectWith(stream, async (ctx) => {
  const init = await ctx.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
  out.loadSession = init.agentCapabilities?.loadSession === true;
  out.agentName = init.agentInfo?.name;
  if (mode === "first") {
    const ses = await ctx.request(acp.methods.agent.session.new, { cwd: process.cwd(), mcpServers: [] });
    out.sessionId = ses.sessionId;
    const first = await Promise.race([
      ctx.request(acp.methods.agent.session.prompt, { sessionId: ses.sessionId, prompt: [{ type: "text", text: "run it" }] }),
      timeout(60000, "the first prompt"),
    ]);
    out.firstStop = first.stopReason;
    out.firstCount = out.updates.length;
    // The second prompt streams slowly; cancel it once it streams.
    const streaming = new Promise((resolve) => { onUpdate = (u) => { if (u.sessionUpdate === "agent_message_chunk") resolve(); }; });
    const second = ctx.request(acp.methods.agent.session.prompt, { sessionId: ses.sessionId, prompt: [{ type: "text", text: "now the slow one" }] });
    await Promise.race([streaming, timeout(60000, "the second prompt to stream")]);
    const t0 = Date.now();
    await ctx.notify(acp.methods.agent.session.cancel, { sessionId: ses.sessionId });
    const res = await Promise.race([second, timeout(60000, "the cancelled prompt")]);
    out.secondStop = res.stopReason;
    out.cancelMs = Date.now() - t0;
  } else if (mode === "resume") {
    out.capabilities = init.agentCapabilities?.sessionCapabilities ?? null;
    const listed = await ctx.request(acp.methods.agent.session.list, {});
    out.listed = listed.sessions.map((s) => s.sessionId + "|" + s.cwd + "|" + (s.title ?? ""));
    const other = await ctx.request(acp.methods.agent.session.list, { cwd: "/elsewhere" });
    out.listedElsewhere = other.sessions.length;
    await ctx.request(acp.methods.agent.session.resume, { sessionId: loadID, cwd: process.cwd(), mcpServers: [] });
    out.sessionId = loadID;
    out.updatesAfterResume = out.updates.length;
    const res = await Promise.race([
      ctx.request(acp.methods.agent.session.prompt, { sessionId: loadID, prompt: [{ type: "text", text: "after the restart" }] }),
      timeout(60000, "the prompt after resume"),
    ]);
    out.firstStop = res.stopReason;
    out.firstCount = out.updates.length;
    await ctx.request(acp.methods.agent.session.close, { sessionId: loadID });
    try {
      await ctx.request(acp.methods.agent.session.prompt, { sessionId: loadID, prompt: [{ type: "text", text: "x" }] });
      out.unknownSession = "accepted";
    } catch (e) {
      out.unknownSession = e.code;
    }
    try {
      await ctx.request(acp.methods.agent.session.resume, { sessionId: "ses_nothere", cwd: process.cwd(), mcpServers: [] });
      out.resumeUnknown = "accepted";
    } catch (e) {
      out.resumeUnknown = e.code;
    }
  } else {
    await Promise.race([
      ctx.request(acp.methods.agent.session.load, { sessionId: loadID, cwd: process.cwd(), mcpServers: [] }),
      timeout(60000, "the load"),
    ]);
    out.sessionId = loadID;
    // A prompt on an unknown session is refused with the SDK's error.
    try {
      await ctx.request(acp.methods.agent.session.prompt, { sessionId: "ses_unknown", prompt: [{ type: "text", text: "x" }] });
      out.unknownSession = "accepted";
    } catch (e) {
      out.unknownSession = e.code;
    }
  }
});
child.stdin.end();
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(0);
