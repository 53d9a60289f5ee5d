// JSON Schemas for the structured-output tests: a dozen shapes (nested objects, arrays, enums, anyOf, $ref,
// formats, patterns, numeric bounds). Strings and arrays are bounded so that a random-weight model, which
// only the grammar keeps on track, always finishes well inside max_tokens.
export const SCHEMAS: Record<string, Record<string, unknown>> = {
  person: {
    type: 'object',
    properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer', minimum: 0, maximum: 150 } },
    required: ['name', 'age'], additionalProperties: false,
  },
  nested: {
    type: 'object',
    properties: {
      user: { type: 'object', properties: { id: { type: 'integer', minimum: 1 }, email: { type: 'string', maxLength: 10 } }, required: ['id'], additionalProperties: false },
      active: { type: 'boolean' },
    },
    required: ['user', 'active'], additionalProperties: false,
  },
  tags: {
    type: 'object',
    properties: { tags: { type: 'array', items: { type: 'string', maxLength: 6 }, minItems: 1, maxItems: 3 } },
    required: ['tags'], additionalProperties: false,
  },
  color_enum: { type: 'object', properties: { color: { enum: ['red', 'green', 'blue'] }, n: { const: 3 } }, required: ['color', 'n'], additionalProperties: false },
  any_of: {
    type: 'object',
    properties: { value: { anyOf: [{ type: 'integer', minimum: -5, maximum: 5 }, { type: 'string', maxLength: 5 }, { type: 'null' }] } },
    required: ['value'], additionalProperties: false,
  },
  one_of_objects: {
    oneOf: [
      { type: 'object', properties: { kind: { const: 'circle' }, r: { type: 'integer', minimum: 0, maximum: 99 } }, required: ['kind', 'r'], additionalProperties: false },
      { type: 'object', properties: { kind: { const: 'square' }, side: { type: 'integer', minimum: 0, maximum: 99 } }, required: ['kind', 'side'], additionalProperties: false },
    ],
  },
  ref_defs: {
    type: 'object',
    $defs: { point: { type: 'object', properties: { x: { type: 'integer', minimum: -9, maximum: 9 }, y: { type: 'integer', minimum: -9, maximum: 9 } }, required: ['x', 'y'], additionalProperties: false } },
    properties: { from: { $ref: '#/$defs/point' }, to: { $ref: '#/$defs/point' } },
    required: ['from', 'to'], additionalProperties: false,
  },
  formats: {
    type: 'object',
    properties: { day: { type: 'string', format: 'date' }, at: { type: 'string', format: 'time' }, id: { type: 'string', format: 'uuid' } },
    required: ['day', 'at', 'id'], additionalProperties: false,
  },
  date_time: { type: 'object', properties: { when: { type: 'string', format: 'date-time' } }, required: ['when'], additionalProperties: false },
  pattern: {
    type: 'object',
    properties: { code: { type: 'string', pattern: '^[A-Z]{2}-[0-9]{3}$' }, phone: { type: 'string', pattern: '^\\+?[0-9]{3,8}$' } },
    required: ['code', 'phone'], additionalProperties: false,
  },
  tuple: {
    type: 'array', prefixItems: [{ type: 'integer', minimum: 0, maximum: 9 }, { type: 'boolean' }, { enum: ['x', 'y'] }], items: false,
  },
  numbers: {
    type: 'object',
    properties: { price: { type: 'number', minimum: 0, maximum: 1000 }, qty: { type: 'integer', exclusiveMinimum: 0, exclusiveMaximum: 10 } },
    required: ['price', 'qty'], additionalProperties: false,
  },
  optional_props: {
    type: 'object',
    properties: { a: { type: 'string', maxLength: 4 }, b: { type: 'integer', minimum: 0, maximum: 9 }, c: { type: 'boolean' } },
    required: ['b'], additionalProperties: false,
  },
};

/** Tools for the tool-calling tests: parameters of several shapes. */
export const TOOLS = [
  {
    type: 'function' as const,
    function: {
      name: 'get_weather', description: 'Weather for a city',
      parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 }, unit: { enum: ['celsius', 'fahrenheit'] } }, required: ['city'], additionalProperties: false },
    },
  },
  {
    type: 'function' as const,
    function: {
      name: 'add', description: 'Adds two integers',
      parameters: { type: 'object', properties: { a: { type: 'integer', minimum: -100, maximum: 100 }, b: { type: 'integer', minimum: -100, maximum: 100 } }, required: ['a', 'b'], additionalProperties: false },
    },
  },
  {
    type: 'function' as const,
    function: {
      name: 'book_meeting', description: 'Books a meeting',
      parameters: {
        type: 'object',
        properties: {
          day: { type: 'string', format: 'date' },
          people: { type: 'array', items: { type: 'string', maxLength: 8 }, minItems: 1, maxItems: 2 },
          online: { type: 'boolean' },
        },
        required: ['day', 'people'], additionalProperties: false,
      },
    },
  },
  { type: 'function' as const, function: { name: 'ping', description: 'No arguments', parameters: { type: 'object', properties: {}, additionalProperties: false } } },
];
