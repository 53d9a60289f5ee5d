// Ready-to-copy client snippets for this server: curl, the `openai` package (TypeScript and Python), `ollama`.

export interface SnippetInput {
  baseUrl: string; // http://host:port
  model: string;
  apiKey: boolean; // the server wants a key: the snippets read it from SPINDLE_API_KEY
}

export function snippets({ baseUrl, model, apiKey }: SnippetInput): Array<{ name: string; code: string }> {
  const m = JSON.stringify(model);
  const curlAuth = apiKey ? ` \\\n  -H "Authorization: Bearer $SPINDLE_API_KEY"` : '';
  const tsKey = apiKey ? 'process.env.SPINDLE_API_KEY' : "'none'";
  const pyKey = apiKey ? 'os.environ["SPINDLE_API_KEY"]' : '"none"';
  const ollamaHeaders = apiKey ? `, headers: { Authorization: \`Bearer \${process.env.SPINDLE_API_KEY}\` }` : '';
  return [
    {
      name: 'curl',
      code: `curl ${baseUrl}/v1/chat/completions \\\n  -H "Content-Type: application/json"${curlAuth} \\\n` +
        `  -d '{"model": ${m}, "messages": [{"role": "user", "content": "Hello!"}]}'`,
    },
    {
      name: 'openai (TypeScript)',
      code: `import OpenAI from 'openai';\n\nconst client = new OpenAI({ baseURL: '${baseUrl}/v1', apiKey: ${tsKey} });\n` +
        `const r = await client.chat.completions.create({\n  model: ${m},\n  messages: [{ role: 'user', content: 'Hello!' }],\n});\n` +
        'console.log(r.choices[0].message.content);',
    },
    {
      name: 'openai (Python)',
      code: `${apiKey ? 'import os\n' : ''}from openai import OpenAI\n\nclient = OpenAI(base_url="${baseUrl}/v1", api_key=${pyKey})\n` +
        `r = client.chat.completions.create(\n    model=${m},\n    messages=[{"role": "user", "content": "Hello!"}],\n)\n` +
        'print(r.choices[0].message.content)',
    },
    {
      name: 'ollama (JavaScript)',
      code: `import { Ollama } from 'ollama';\n\nconst ollama = new Ollama({ host: '${baseUrl}'${ollamaHeaders} });\n` +
        `const r = await ollama.chat({ model: ${m}, messages: [{ role: 'user', content: 'Hello!' }] });\n` +
        'console.log(r.message.content);',
    },
  ];
}
