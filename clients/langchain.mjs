// LangChain's OpenAI chat model against modeld: bindTools with a forced tool
// and withStructuredOutput with a zod schema (json schema and function
// calling methods).
import { ChatOpenAI } from '@langchain/openai';
import { tool } from '@langchain/core/tools';
import { z } from 'zod';
import { base, check, model, run } from './lib.mjs';

const Weather = z.object({ city: z.string().max(8), unit: z.enum(['c', 'f']) });

run(async () => {
  const llm = new ChatOpenAI({
    model, apiKey: 'unused', temperature: 1, maxTokens: 1500, maxRetries: 0, modelKwargs: { seed: 5 },
    configuration: { baseURL: `${base}/v1` },
  });
  const getWeather = tool(async ({ city }) => `sunny in ${city}`, { name: 'get_weather', description: 'Weather of a city', schema: Weather });
  const bound = llm.bindTools([getWeather], { tool_choice: 'get_weather' });
  const ai = await bound.invoke('Weather in Paris?');
  check(ai.tool_calls?.length > 0, 'bindTools: the answer has tool_calls', ai);
  for (const call of ai.tool_calls) {
    check(call.name === 'get_weather' && Weather.safeParse(call.args).success, 'bindTools: get_weather args validate', call);
  }
  // The call's result goes back as a ToolMessage; the model answers (any text).
  const result = await getWeather.invoke(ai.tool_calls[0]);
  const after = await llm.invoke(['Weather in Paris?', ai, result].map((m) => (typeof m === 'string' ? ['user', m] : m)));
  check(typeof after.content === 'string', 'round trip: the answer after the tool result is text', after);

  const out = {};
  for (const method of ['jsonSchema', 'functionCalling']) {
    const structured = llm.withStructuredOutput(Weather, { name: 'weather', method });
    const obj = await structured.invoke('Weather in Paris?');
    check(Weather.safeParse(obj).success, `withStructuredOutput ${method}: the object validates`, obj);
    out[method] = obj;
  }
  return { calls: ai.tool_calls.length, ...out };
});
