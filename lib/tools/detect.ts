// Picks a tool-call parser from a chat template's text, by the markers its tool instructions use.
// Invariant: returns a canonical parser name only on a marker specific to that format, otherwise null; XML-style
// `<tool_call>` formats no parser here reads (Qwen3-Coder `<function=`, GLM `<arg_key>`) give null, not hermes.

/** Canonical parser name for a chat template, or null when it shows no known tool-call format. */
export function detectToolCallParser(chatTemplate: string): string | null {
  const t = chatTemplate;
  if (t.includes('<|tool_call_start|>') || t.includes('<|tool_list_start|>')) return 'lfm2';
  if (t.includes('<tool_call>')) {
    if (t.includes('<function=') || t.includes('<arg_key>')) return null;
    return 'hermes';
  }
  // Mistral: [TOOL_CALLS] then a JSON list (Nemo, Small 3.0 / 3.1). Templates of the later `name[ARGS]{...}` form
  // give null: the parser reads that form, but the tool grammar writes the list form only.
  if (t.includes('[TOOL_CALLS]')) return t.includes('[ARGS]') ? null : 'mistral';
  if (t.includes('<|python_tag|>')) return 'llama3_json';
  // Llama 3.1 / 3.2 JSON tool instructions: `Respond in the format {"name": function name, "parameters": ...}`
  if (/\{\s*\\?"name\\?":\s*function name,\s*\\?"parameters\\?"/.test(t)) return 'llama3_json';
  // Llama 3.2 / 4 pythonic tool instructions (vLLM's example templates)
  if (t.includes('[func_name1(params_name1=params_value1')) return 'pythonic';
  return null;
}
