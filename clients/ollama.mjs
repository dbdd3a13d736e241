// Drives modeld's Ollama API with the official ollama npm client
// (cmd/modeld/ollama_e2e_test.go runs it): list, show (template, model_info,
// capabilities), chat and generate
// streamed and not (greedy, so the same text), think, format with a JSON
// Schema (the output parses and validates), a tool call (valid whenever the
// model makes one: Ollama has no tool_choice to force it) and a tool-result
// round trip, suffix (fill-in-the-middle) and its refusal, embed and
// embeddings, ps, pull with progress from the test's hub, copy, delete, an unknown model's 404 and an unload by keep_alive 0.
// It prints one JSON object for the test to check and exits non-zero when a
// call fails or an assertion of its own does not hold.
import { Ollama } from "ollama";

import { base, model, check, run } from "./lib.mjs";

const embedModel = process.env.EMBED_MODEL;
const pullModel = process.env.PULL_MODEL;
const coderModel = process.env.CODER_MODEL;
const client = new Ollama({ host: base });

const byName = (list, name) => list.models.find((m) => m.name === name);

run(async () => {
  const out = {};

  const list = await client.list();
  const listed = byName(list, model + ":latest");
  check(listed && listed.details.format === "gguf" && listed.size > 0 && listed.digest.length === 64, "list has the chat model", list);
  check(byName(list, embedModel + ":latest"), "list has the embedding model", list);

  const shown = await client.show({ model });
  check(shown.details.format === "gguf" && shown.capabilities.includes("completion"), "show", shown);
  // The GGUF's chat template (Qwen2.5's renders tools) and its metadata; the
  // coder's vocabulary has fill-in-the-middle tokens, so suffix works on it.
  check(shown.template.includes("<|im_start|>") && shown.capabilities.includes("tools") && !shown.capabilities.includes("insert") &&
    shown.model_info["general.architecture"] === "llama" && shown.model_info["llama.context_length"] > 0, "show template and model_info", shown.capabilities);
  const coderShown = await client.show({ model: coderModel });
  check(coderShown.capabilities.includes("insert"), "show: the coder model can insert", coderShown.capabilities);

  // chat, streamed and not: greedy, so the same text and counts.
  const hello = { model, messages: [{ role: "user", content: "Hello" }], options: { temperature: 0, num_predict: 8 } };
  const chat = await client.chat(hello);
  check(chat.done && chat.message.role === "assistant" && chat.eval_count > 0 && chat.eval_count <= 8, "chat", chat);
  check(["stop", "length"].includes(chat.done_reason) && chat.total_duration >= chat.eval_duration, "chat final", chat);
  let streamed = "";
  let last;
  for await (const part of await client.chat({ ...hello, stream: true })) {
    streamed += part.message.content;
    last = part;
  }
  check(last.done && streamed === chat.message.content && last.eval_count === chat.eval_count, "chat stream = chat", { streamed, last, chat });
  out.chat = { text: chat.message.content, prompt_eval_count: chat.prompt_eval_count, eval_count: chat.eval_count, done_reason: chat.done_reason };

  const thinkOff = await client.chat({ ...hello, think: false });
  check(thinkOff.done && !thinkOff.message.thinking, "think false", thinkOff);

  // generate, streamed and not.
  const ask = { model, prompt: "Why is the sky blue?", options: { temperature: 0, num_predict: 8 } };
  const gen = await client.generate(ask);
  let genStreamed = "";
  let genLast;
  for await (const part of await client.generate({ ...ask, stream: true })) {
    genStreamed += part.response;
    genLast = part;
  }
  check(gen.done && genLast.done && gen.response === genStreamed && gen.eval_count === genLast.eval_count, "generate stream = generate", { gen, genStreamed });
  out.generate = { text: gen.response, prompt_eval_count: gen.prompt_eval_count, eval_count: gen.eval_count };

  // suffix: StarCoder's vocabulary has fill-in-the-middle tokens, this
  // Qwen2 vocabulary none (a clear 400).
  const infill = await client.generate({ model: coderModel, prompt: "def add(a, b):\n", suffix: "\n    return c", options: { temperature: 0, num_predict: 4 } });
  check(infill.done && infill.eval_count > 0 && infill.prompt_eval_count > 0, "infill", infill);
  out.infill = { prompt_eval_count: infill.prompt_eval_count };
  try {
    await client.generate({ model, prompt: "x", suffix: "y" });
    check(false, "suffix on a model without fill-in-the-middle tokens succeeded", null);
  } catch (err) {
    check(err.status_code === 400 && err.error.includes("fill-in-the-middle"), "suffix refused", { status: err.status_code, error: err.error });
  }

  // format with a JSON Schema: the grammar makes random weights write a valid object.
  const schema = {
    type: "object",
    properties: { city: { type: "string", maxLength: 8 }, unit: { enum: ["c", "f"] } },
    required: ["city", "unit"],
    additionalProperties: false,
  };
  const formatted = await client.chat({
    model,
    messages: [{ role: "user", content: "The weather in Paris, as JSON." }],
    format: schema,
    options: { temperature: 0, num_predict: 200 },
  });
  const obj = JSON.parse(formatted.message.content);
  check(
    typeof obj.city === "string" && [...obj.city].length <= 8 && ["c", "f"].includes(obj.unit) && Object.keys(obj).length === 2,
    "format output validates",
    obj,
  );
  out.format = obj;

  // tools: a call, when the model makes one, names the tool and carries an object.
  const tools = [
    {
      type: "function",
      function: {
        name: "get_weather",
        description: "Weather of a city",
        parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
      },
    },
  ];
  const ask2 = { model, messages: [{ role: "user", content: "Weather in Paris?" }], tools, options: { temperature: 0, num_predict: 64 } };
  const called = await client.chat(ask2);
  for (const tc of called.message.tool_calls ?? []) {
    check(tc.function.name === "get_weather" && typeof tc.function.arguments === "object" && !Array.isArray(tc.function.arguments), "tool call shape", tc);
  }
  out.tool_calls = (called.message.tool_calls ?? []).length;
  // The round trip: the call and its result are rendered into the prompt.
  const round = await client.chat({
    ...ask2,
    options: { temperature: 0, num_predict: 4 },
    messages: [
      ...ask2.messages,
      { role: "assistant", content: "", tool_calls: [{ function: { name: "get_weather", arguments: { city: "Paris" } } }] },
      { role: "tool", content: '{"temp_c": 21}', tool_name: "get_weather" },
    ],
  });
  check(round.done && round.prompt_eval_count > called.prompt_eval_count, "round trip renders the call and the result", { round, called });
  out.round_trip = { prompt_eval_count: round.prompt_eval_count, without: called.prompt_eval_count };

  // embeddings.
  const emb = await client.embed({ model: embedModel, input: ["Why is the sky blue?", "Why is the grass green?"] });
  check(emb.embeddings.length === 2 && emb.embeddings[0].length > 0 && emb.prompt_eval_count > 0, "embed", emb);
  const norm = Math.hypot(...emb.embeddings[0]);
  check(Math.abs(norm - 1) < 1e-3, "embed normalizes", norm);
  const old = await client.embeddings({ model: embedModel, prompt: "Why is the sky blue?" });
  check(old.embedding.length === emb.embeddings[0].length, "embeddings", old);
  out.embed = { vectors: emb.embeddings.length, dims: emb.embeddings[0].length, prompt_eval_count: emb.prompt_eval_count };

  // ps lists what the calls above loaded.
  const ps = await client.ps();
  const running = byName(ps, model + ":latest");
  check(running && running.expires_at && typeof running.size_vram === "number", "ps", ps);

  // pull with progress, then copy and delete.
  const statuses = [];
  let sawTotal = false;
  for await (const p of await client.pull({ model: pullModel, stream: true })) {
    statuses.push(p.status);
    if (p.total > 0 && p.completed === p.total && p.digest?.startsWith("sha256:")) {
      sawTotal = true;
    }
  }
  check(statuses[0] === "pulling manifest" && statuses.at(-1) === "success" && sawTotal, "pull progress", statuses);
  out.pull = [...new Set(statuses)];
  const pulledList = await client.list();
  const pulled = pulledList.models.find((m) => m.name.startsWith("org/tiny"));
  check(pulled, "the pulled model is listed", pulledList);
  await client.copy({ source: pulled.name, destination: "org/tiny-copy" });
  check(byName(await client.list(), "org/tiny-copy:latest"), "copy is listed", null);
  await client.delete({ model: pulled.name });
  await client.delete({ model: "org/tiny-copy" });
  const after = await client.list();
  check(!after.models.some((m) => m.name.startsWith("org/tiny")), "deleted", after);

  // An unknown model is Ollama's 404.
  try {
    await client.chat({ model: "nope", messages: [{ role: "user", content: "hi" }] });
    check(false, "chat with an unknown model succeeded", null);
  } catch (err) {
    check(err.status_code === 404 && err.error === "model 'nope' not found", "unknown model", { status: err.status_code, error: err.error });
  }

  // keep_alive 0 with no prompt unloads the model.
  const unload = await client.generate({ model, prompt: "", keep_alive: 0 });
  check(unload.done && unload.done_reason === "unload", "unload", unload);
  check(!byName(await client.ps(), model + ":latest"), "unloaded", null);

  const version = await client.version();
  check(typeof version.version === "string" && version.version !== "", "version", version);
  return out;
});
