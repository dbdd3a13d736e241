// Sends one image through each official client in its own shape against a
// vision model (cmd/modeld/vision_e2e_test.go runs it): the openai SDK's
// image_url content part with a data URL, @anthropic-ai/sdk's base64 image
// block (and count_tokens of the same message), the Responses API's
// input_image through the openai SDK, and the ollama client's images (a
// Uint8Array it encodes itself). IMAGE is the PNG, base64. It prints the
// prompt token counts for the test to check.
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import { base, check, model, run } from './lib.mjs';

const image = process.env.IMAGE;
if (!image) {
  console.error('set IMAGE (a PNG, base64)');
  process.exit(2);
}
const dataURL = `data:image/png;base64,${image}`;

run(async () => {
  const out = {};
  const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0 });
  const chat = await openai.chat.completions.create({
    model, max_tokens: 4, temperature: 0,
    messages: [{ role: 'user', content: [{ type: 'text', text: 'what is it?' }, { type: 'image_url', image_url: { url: dataURL } }] }],
  });
  check(chat.choices[0].message.role === 'assistant', 'openai: an assistant message', chat);
  out.openai = chat.usage.prompt_tokens;

  const resp = await openai.responses.create({
    model, max_output_tokens: 4, temperature: 0,
    input: [{ role: 'user', content: [{ type: 'input_text', text: 'what is it?' }, { type: 'input_image', image_url: dataURL, detail: 'auto' }] }],
  });
  check(resp.status === 'completed' || resp.status === 'incomplete', 'responses: a finished response', resp.status);
  out.responses = resp.usage.input_tokens;

  const anthropic = new Anthropic({ baseURL: base, apiKey: 'unused', maxRetries: 0 });
  const messages = [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: image } }, { type: 'text', text: 'what is it?' }] }];
  const msg = await anthropic.messages.create({ model, max_tokens: 4, temperature: 0, messages });
  check(msg.type === 'message', 'anthropic: a message', msg);
  out.anthropic = msg.usage.input_tokens;
  const counted = await anthropic.messages.countTokens({ model, messages });
  out.anthropic_count = counted.input_tokens;

  const ollama = new Ollama({ host: base });
  const res = await ollama.chat({
    model, stream: false, options: { num_predict: 4, temperature: 0 },
    messages: [{ role: 'user', content: 'what is it?', images: [Buffer.from(image, 'base64')] }],
  });
  check(res.done === true, 'ollama: done', res);
  out.ollama = res.prompt_eval_count;
  return out;
});
