// Drives modeld's Anthropic Messages API with the official @anthropic-ai/sdk
// (cmd/modeld/anthropic_e2e_test.go runs it): messages.create and
// messages.stream (the final message assembled by the SDK), a tool_use /
// tool_result round trip under tool_choice tool, a stop sequence,
// count_tokens, an unknown
// model surfaced as the SDK's NotFoundError, Claude Code's request shape
// over two sessions, and thinking blocks of a reasoning model. It prints one JSON
// object for the test to check and exits non-zero when a call fails or an
// assertion of its own does not hold.
import Anthropic from "@anthropic-ai/sdk";

const base = process.env.MODELD_URL;
const model = process.env.MODEL;
if (!base || !model) {
  console.error("set MODELD_URL and MODEL");
  process.exit(2);
}

const client = new Anthropic({ baseURL: base, apiKey: "unused", maxRetries: 0 });

function check(ok, what) {
  if (!ok) {
    throw new Error("assertion failed: " + what);
  }
}

const out = {};
const hello = { model, max_tokens: 8, temperature: 0, messages: [{ role: "user", content: "Hello, Claude" }] };

// messages.create, then the same request streamed: greedy, so the same text.
const created = await client.messages.create(hello);
check(created.type === "message" && created.role === "assistant" && created.id.startsWith("msg_"), "create shape " + JSON.stringify(created));
out.create = {
  text: created.content.filter((b) => b.type === "text").map((b) => b.text).join(""),
  stop_reason: created.stop_reason,
  usage: created.usage,
};

const stream = client.messages.stream(hello);
let streamed = "";
const events = [];
stream.on("text", (t) => {
  streamed += t;
});
stream.on("streamEvent", (ev) => {
  events.push(ev.type);
});
const final = await stream.finalMessage();
out.stream = {
  text: final.content.filter((b) => b.type === "text").map((b) => b.text).join(""),
  deltas: streamed,
  stop_reason: final.stop_reason,
  usage: final.usage,
  events: [...new Set(events)],
};

// A tool_use under tool_choice tool, streamed and not, then its result sent back.
const schema = {
  type: "object",
  properties: { city: { type: "string", maxLength: 8 }, unit: { enum: ["c", "f"] } },
  required: ["city", "unit"],
  additionalProperties: false,
};
const tools = [{ name: "get_weather", description: "Weather of a city", input_schema: schema }];
const ask = [{ role: "user", content: "Weather in Paris?" }];
const toolReq = {
  model,
  max_tokens: 300,
  temperature: 0,
  tools,
  tool_choice: { type: "tool", name: "get_weather", disable_parallel_tool_use: true },
  messages: ask,
};
const called = await client.messages.create(toolReq);
const uses = called.content.filter((b) => b.type === "tool_use");
check(uses.length === 1, "one tool_use block: " + JSON.stringify(called.content));
check(uses[0].id.startsWith("toolu_") && typeof uses[0].input === "object", "tool_use block " + JSON.stringify(uses[0]));
const calledStream = await client.messages.stream(toolReq).finalMessage();
const streamedUses = calledStream.content.filter((b) => b.type === "tool_use");
out.tool = {
  stop_reason: called.stop_reason,
  name: uses[0].name,
  input: uses[0].input,
  streamed_stop_reason: calledStream.stop_reason,
  streamed_input: streamedUses.length === 1 ? streamedUses[0].input : null,
};

// A stop sequence the grammar makes the model write: stop_reason
// stop_sequence, naming it, streamed and not.
const stopReq = { ...toolReq, stop_sequences: ["never-written", "get_weather"] };
const stopped = await client.messages.create(stopReq);
const stoppedStream = await client.messages.stream(stopReq).finalMessage();
out.stop = {
  stop_reason: stopped.stop_reason,
  stop_sequence: stopped.stop_sequence,
  streamed_stop_reason: stoppedStream.stop_reason,
  streamed_stop_sequence: stoppedStream.stop_sequence,
};

const followUp = {
  model,
  max_tokens: 8,
  temperature: 0,
  tools,
  messages: [
    ...ask,
    { role: "assistant", content: called.content },
    { role: "user", content: [{ type: "tool_result", tool_use_id: uses[0].id, content: [{ type: "text", text: '{"temp_c": 21}' }] }] },
  ],
};
const answered = await client.messages.create(followUp);
out.result = { stop_reason: answered.stop_reason, usage: answered.usage };

// count_tokens of the follow-up: the prompt its generation saw.
const { max_tokens, temperature, ...countReq } = followUp;
out.count = await client.messages.countTokens(countReq);

// An unknown model: the SDK's NotFoundError with Anthropic's error body.
try {
  await client.messages.create({ ...hello, model: "no/such-model" });
  out.not_found = { thrown: false };
} catch (err) {
  out.not_found = {
    thrown: true,
    not_found_error: err instanceof Anthropic.NotFoundError,
    status: err.status,
    type: err.error?.error?.type,
    message: err.error?.error?.message,
  };
}

// Claude Code's shape through the SDK's beta messages (?beta=true): its
// attribution line first in system, its environment block as a system
// message inside messages with cache_control, thinking absent; then a new
// session, whose attribution line differs.
const claudeCode = (hash) => ({
  model,
  max_tokens: 8,
  temperature: 0,
  system: [
    { type: "text", text: `x-anthropic-billing-header: cc_version=2.1.328.${hash}; cc_entrypoint=sdk-cli; cch=00000;` },
    { type: "text", text: "You are Claude Code, Anthropic's official CLI for Claude.", cache_control: { type: "ephemeral" } },
  ],
  messages: [
    { role: "user", content: [{ type: "text", text: "say hi" }] },
    { role: "system", content: [{ type: "text", text: "# Environment\nWorking directory: /w", cache_control: { type: "ephemeral" } }] },
  ],
  metadata: { user_id: "u" },
});
const session = async (hash) => {
  const m = await client.beta.messages.stream(claudeCode(hash)).finalMessage();
  check(m.type === "message" && (m.stop_reason === "max_tokens" || m.stop_reason === "end_turn"), "claude code shape " + JSON.stringify(m));
  return m.usage;
};
out.claude_code = { first: await session("a3f"), second: await session("09c") };

// A reasoning model (THINK_MODEL, whose template opens the thinking block):
// thinking blocks with a signature, created and streamed.
const thinkModel = process.env.THINK_MODEL;
if (thinkModel) {
  const think = {
    model: thinkModel,
    max_tokens: 8,
    temperature: 0,
    thinking: { type: "enabled", budget_tokens: 1024 },
    messages: [{ role: "user", content: "Why is the sky blue?" }],
  };
  const thought = await client.messages.create(think);
  const thoughtStream = client.messages.stream(think);
  const signatures = [];
  thoughtStream.on("signature", (sig) => signatures.push(sig));
  const thoughtFinal = await thoughtStream.finalMessage();
  const firstThinking = (m) => m.content.find((b) => b.type === "thinking") ?? null;
  out.thinking = {
    create: firstThinking(thought),
    stream: firstThinking(thoughtFinal),
    signatures,
    stop_reason: thought.stop_reason,
  };
}

console.log(JSON.stringify(out));
