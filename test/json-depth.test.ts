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
