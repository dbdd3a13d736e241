// The AI SDK against modeld through its OpenAI-compatible provider:
// generateText with a tool and toolChoice required, a forced named tool, and
// generateObject with a zod schema.
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateObject, generateText, tool } from 'ai';
import { z } from 'zod';
import { base, check, model, run } from './lib.mjs';

const Weather = z.object({ city: z.string().max(8), unit: z.enum(['c', 'f']) });
const provider = createOpenAICompatible({ name: 'modeld', baseURL: `${base}/v1`, apiKey: 'unused', supportsStructuredOutputs: true });

run(async () => {
  const tools = {
    get_weather: tool({ description: 'Weather of a city', inputSchema: Weather }),
    get_time: tool({ description: 'Local time of a city', inputSchema: z.object({ city: z.string().max(8) }) }),
  };
  const required = await generateText({
    model: provider(model), prompt: 'Weather in Paris?', tools, toolChoice: 'required', maxOutputTokens: 1500, temperature: 1, seed: 7, maxRetries: 0,
  });
  check(required.finishReason === 'tool-calls' && required.toolCalls.length > 0, 'generateText required: tool calls', required.toolCalls);
  for (const call of required.toolCalls) {
    check(call.toolName in tools, 'generateText required: a known tool', call);
  }
  const named = await generateText({
    model: provider(model), prompt: 'Weather in Paris?', tools, toolChoice: { type: 'tool', toolName: 'get_weather' },
    maxOutputTokens: 1500, temperature: 1, seed: 3, maxRetries: 0,
  });
  check(named.toolCalls.length > 0 && named.toolCalls.every((c) => c.toolName === 'get_weather' && Weather.safeParse(c.input).success),
    'generateText named: get_weather calls whose input validates', named.toolCalls);

  const obj = await generateObject({
    model: provider(model), prompt: 'Weather in Paris?', schema: Weather, schemaName: 'weather', maxOutputTokens: 1500, temperature: 0, maxRetries: 0,
  });
  check(Weather.safeParse(obj.object).success, 'generateObject: the object validates', obj.object);
  return { required: required.toolCalls.length, named: named.toolCalls[0].input, object: obj.object, usage: obj.usage };
});
