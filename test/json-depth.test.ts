// The body parser's depth limit (src/api/middleware/json-body.ts): exactly MAX_JSON_DEPTH levels
// pass to the parser, one more is refused before parsing, whatever the kind of nesting.
import test from 'ava';
import { inspectJson, MAX_JSON_DEPTH } from '../src/api/middleware/json-body.ts';
import { nestedArrays, nestedObjects } from './helpers/hostile.ts';

const bytes = (text: string) => new TextEncoder().encode(text);

for (const [kind, nested] of [['arrays', nestedArrays], ['objects', nestedObjects]] as const) {
  test(`${kind} nested ${MAX_JSON_DEPTH} deep pass; one level more is refused`, (t) => {
    t.is(inspectJson(bytes(nested(MAX_JSON_DEPTH))), null);
    t.regex(inspectJson(bytes(nested(MAX_JSON_DEPTH + 1))) ?? '', /deep|nest/i);
  });
}

test('brackets inside strings do not count as nesting', (t) => {
  t.is(inspectJson(bytes(JSON.stringify({ s: '['.repeat(MAX_JSON_DEPTH * 2) }))), null);
});

// An unpaired surrogate escape parses to a JavaScript string that jsonb refuses (a 500 from
// application metadata and event type schemas, once) and that text stores as U+FFFD.
test('unpaired UTF-16 surrogate escapes are refused before parsing; pairs, and text that only looks like one, pass', (t) => {
  for (const refused of ['{"a":"\\ud800"}', '{"a":"\\uDFFF"}', '{"\\udbff":1}', '{"a":"\\ud800\\u0041"}', '{"a":"\\ud800x"}',
    '{"a":"\\udc00\\ud800"}', '{"a":["ok","\\ud83d"]}', '{"a":"\\ud800']) {
    t.regex(inspectJson(bytes(refused)) ?? '', /unpaired UTF-16 surrogate/, refused);
  }
  for (const passed of ['{"a":"\\ud83d\\ude00"}', '{"a":"\\uD83D\\uDE00 and \\u00e9"}', '{"a":"\\\\ud800"}', '{"a":"🦄"}',
    JSON.stringify({ a: '\\ud800 as text' }), '{"a":"\\ud83d\\ude00\\ud83d\\ude00"}']) {
    t.is(inspectJson(bytes(passed)), null, passed);
  }
});
