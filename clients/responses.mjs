// The openai npm SDK's Responses API against modeld: responses.create
// streamed and not (the stream helper's final response), a function call
// forced by tool_choice and its function_call_output sent back through
// previous_response_id, structured output with responses.parse and a zod
// text format, retrieve and delete, store false, and an unknown
// previous_response_id as the SDK's NotFoundError.
import OpenAI from 'openai';
import { zodTextFormat } from 'openai/helpers/zod';
import { z } from 'zod';
import { base, check, model, run } from './lib.mjs';

const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0 });
const input = 'Tell me a three sentence bedtime story about a unicorn.';
const weather = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 8 }, unit: { type: 'string', enum: ['c', 'f'] } },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const tools = [{ type: 'function', name: 'get_weather', description: 'Weather of a city', parameters: weather, strict: true }];
const forced = { type: 'function', name: 'get_weather' };

// notFound runs f and says whether it threw the SDK's NotFoundError.
async function notFound(f) {
  try {
    await f();
    return { thrown: false };
  } catch (err) {
    return { thrown: true, not_found_error: err instanceof OpenAI.NotFoundError, status: err.status, message: err.message };
  }
}

function usage(u) {
  return { input_tokens: u.input_tokens, output_tokens: u.output_tokens, total_tokens: u.total_tokens };
}

run(async () => {
  const created = await client.responses.create({ model, input, max_output_tokens: 8, temperature: 0 });
  check(created.object === 'response' && created.id.startsWith('resp_'), 'create: a response object', created);

  const stream = client.responses.stream({ model, input, max_output_tokens: 8, temperature: 0 });
  const events = [];
  let deltas = '';
  let seq = -1;
  for await (const ev of stream) {
    check(ev.sequence_number === seq + 1, 'stream: sequence numbers count up from 0', ev);
    seq = ev.sequence_number;
    events.push(ev.type);
    if (ev.type === 'response.output_text.delta') deltas += ev.delta;
  }
  const final = await stream.finalResponse();

  const call = await client.responses.create({ model, input: 'Weather in Paris?', tools, tool_choice: forced, max_output_tokens: 1500, temperature: 0 });
  const fc = call.output.find((o) => o.type === 'function_call');
  check(fc && fc.name === 'get_weather' && fc.call_id, 'call: a function_call item of get_weather', call.output);
  const callStream = client.responses.stream({ model, input: 'Weather in Paris?', tools, tool_choice: forced, max_output_tokens: 1500, temperature: 0 });
  const streamedCall = (await callStream.finalResponse()).output.find((o) => o.type === 'function_call');
  const result = await client.responses.create({
    model, previous_response_id: call.id, tools, max_output_tokens: 8, temperature: 0,
    input: [{ type: 'function_call_output', call_id: fc.call_id, output: JSON.stringify({ temp_c: 21 }) }],
  });

  const Event = z.object({ name: z.string().max(8), day: z.enum(['friday', 'saturday']) });
  const parsed = await client.responses.parse({
    model, input: 'Alice and Bob are going to a science fair on Friday.', max_output_tokens: 1500, temperature: 0,
    text: { format: zodTextFormat(Event, 'event') },
  });
  check(parsed.output_parsed && Event.safeParse(parsed.output_parsed).success, 'parse: output_parsed validates', parsed.output_text);

  // A request shaped as Codex sends it: developer and user message items,
  // non-strict function tools, parallel_tool_calls false, reasoning,
  // store false, and fields modeld accepts without reading.
  const codexStream = await client.responses.create({
    model, stream: true, store: false, tool_choice: 'auto', parallel_tool_calls: false, max_output_tokens: 8,
    instructions: 'You are a coding agent.',
    input: [
      { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'Sandbox: read-only.' }] },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'List the files.' }] },
    ],
    tools: [{ type: 'function', name: 'shell', description: 'Runs a command', strict: false,
      parameters: { type: 'object', properties: { command: { type: 'array', items: { type: 'string' } } }, required: ['command'] } }],
    reasoning: { effort: 'medium', summary: 'auto' }, include: ['reasoning.encrypted_content'],
    prompt_cache_key: '0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b', client_metadata: { originator: 'codex_cli_rs' },
  });
  const codexEvents = [];
  for await (const ev of codexStream) codexEvents.push(ev.type);
  check(['response.completed', 'response.incomplete'].includes(codexEvents.at(-1)), 'codex: the stream ends with the response', codexEvents);

  const retrieved = await client.responses.retrieve(created.id);
  check(retrieved.id === created.id && retrieved.output_text === created.output_text, 'retrieve: the stored response', retrieved);
  await client.responses.delete(created.id);
  const unstored = await client.responses.create({ model, input: 'x', max_output_tokens: 1, store: false });

  // A reasoning model (THINK_MODEL, whose template opens the thinking
  // block): a reasoning item before any message, created and streamed alike.
  let reasoning = null;
  if (process.env.THINK_MODEL) {
    const think = { model: process.env.THINK_MODEL, input: 'Why is the sky blue?', max_output_tokens: 8, temperature: 0,
      reasoning: { effort: 'high', summary: 'auto' } };
    const thought = await client.responses.create(think);
    const thoughtStream = client.responses.stream(think);
    let thinkDeltas = '';
    thoughtStream.on('response.reasoning_text.delta', (ev) => { thinkDeltas += ev.delta; });
    const thoughtFinal = await thoughtStream.finalResponse();
    const item = (r) => {
      const rs = r.output[0];
      return rs?.type === 'reasoning' ? { text: rs.content?.[0]?.text, summary: rs.summary?.[0]?.text, status: rs.status } : rs ?? null;
    };
    reasoning = { create: item(thought), stream: item(thoughtFinal), deltas: thinkDeltas, status: thought.status,
      reasoning_tokens: thought.usage.output_tokens_details.reasoning_tokens, output_tokens: thought.usage.output_tokens };
  }

  return {
    reasoning,
    codex: { last: codexEvents.at(-1), events: codexEvents.length },
    create: { text: created.output_text, status: created.status, usage: usage(created.usage) },
    stream: { text: final.output_text, deltas, status: final.status, usage: usage(final.usage), events },
    call: { name: fc.name, arguments: fc.arguments, status: call.status, input_tokens: call.usage.input_tokens, streamed_arguments: streamedCall?.arguments },
    result: { status: result.status, previous: result.previous_response_id === call.id, input_tokens: result.usage.input_tokens },
    parsed: parsed.output_parsed,
    deleted: await notFound(() => client.responses.retrieve(created.id)),
    unstored: await notFound(() => client.responses.retrieve(unstored.id)),
    not_found: await notFound(() => client.responses.create({ model, input: 'x', previous_response_id: 'resp_0123456789abcdef' })),
  };
});
