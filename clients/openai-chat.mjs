// The openai npm SDK's agent paths against modeld: chat.completions.parse
// with a zod schema (response_format json_schema), tools with tool_choice
// required and a named function (parsed arguments validated by zod), and the
// streaming helper assembling the same kind of call.
import OpenAI from 'openai';
import { zodFunction, zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';
import { base, check, model, run } from './lib.mjs';

const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0 });
const Weather = z.object({ city: z.string().max(8), unit: z.enum(['c', 'f']) });
const messages = [{ role: 'user', content: 'Weather in Paris?' }];

run(async () => {
  const parsed = await client.chat.completions.parse({
    model, messages, max_tokens: 1500, temperature: 0,
    response_format: zodResponseFormat(Weather, 'weather'),
  });
  const msg = parsed.choices[0].message;
  check(msg.parsed && Weather.safeParse(msg.parsed).success, 'parse: message.parsed validates', msg);

  const tools = [zodFunction({ name: 'get_weather', description: 'Weather of a city', parameters: Weather })];
  const required = await client.chat.completions.parse({
    model, messages, tools, tool_choice: 'required', max_tokens: 1500, temperature: 1, seed: 7,
  });
  const rc = required.choices[0];
  check(rc.finish_reason === 'tool_calls' && rc.message.tool_calls.length > 0, 'required: finish_reason tool_calls with calls', rc);
  for (const call of rc.message.tool_calls) {
    check(call.function.name === 'get_weather' && Weather.safeParse(call.function.parsed_arguments).success,
      'required: a get_weather call whose arguments validate', call);
  }

  const other = zodFunction({ name: 'get_time', description: 'Local time of a city', parameters: z.object({ city: z.string().max(8) }) });
  const named = await client.chat.completions.parse({
    model, messages, tools: [...tools, other], max_tokens: 1500, temperature: 1, seed: 3,
    tool_choice: { type: 'function', function: { name: 'get_time' } },
  });
  const nc = named.choices[0].message.tool_calls;
  check(nc.length > 0 && nc.every((c) => c.function.name === 'get_time' && c.function.parsed_arguments?.city !== undefined),
    'named: only get_time calls with a city', nc);

  const stream = client.chat.completions.stream({
    model, messages, tools, tool_choice: 'required', max_tokens: 1500, temperature: 1, seed: 7,
  });
  const final = await stream.finalChatCompletion();
  const sc = final.choices[0].message.tool_calls;
  check(JSON.stringify(sc.map((c) => [c.function.name, c.function.arguments])) ===
    JSON.stringify(rc.message.tool_calls.map((c) => [c.function.name, c.function.arguments])),
  'stream: the same calls as the non-streamed request with the same seed', { streamed: sc, plain: rc.message.tool_calls });
  return { parsed: msg.parsed, required: rc.message.tool_calls.length, named: nc[0].function.arguments };
});
