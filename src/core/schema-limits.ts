// Limits on an event type schema, checked before Ajv sees it, so that no schema can make
// compiling or validating unbounded: size, nesting, branching, patterns RE2 can run, $refs that
// resolve inside the schema, no $ref loop that never descends into the payload, and a bound on
// the subschemas one payload value can meet when every $ref is followed.
import { compilePattern, type SchemaProblem } from './json-schema-engine.ts';

export const SCHEMA_LIMITS = {
  /** characters of the schema's JSON */
  maxBytes: 65_536,
  /** nesting of objects and arrays in the schema document */
  maxDepth: 64,
  /** entries of one allOf, anyOf or oneOf */
  maxBranches: 100,
  /** subschemas visited when every $ref is followed (each loop through the payload counted once) */
  maxExpanded: 10_000,
} as const;

/**
 * What makes a schema known-cheap, so it is compiled and run inline (small payloads): no
 * recursion, at most this many expanded subschemas, this many characters of JSON and this many
 * RE2 instructions over all its patterns. Compiling grows with size, validating with both.
 */
export const CHEAP = { expanded: 1_000, chars: 4_096, patternInstructions: 2_000 } as const;

/**
 * `work`: the subschemas a payload value can meet when every $ref is followed (`expanded`), each
 * weighed by what checking it costs: 1, and 1 more for every WEIGHT_CHARS characters of its
 * WEIGHED keywords (checked value by value, name by name). A payload of n characters holds
 * fewer than n values, and each meets at most these, so one validation costs at most `work`
 * times the payload's length, in steps of a few ns (json-schema.ts, `runsInline`).
 * `patternReach`: RE2 instructions summed over every place a payload value can meet a pattern
 * when every $ref is followed (a pattern reached through three $refs counts three times);
 * `formatReach`: how many places it can meet a `format` whose check may take more than linear
 * time in the string's length (not in LINEAR_FORMATS). What one inline validation may cost
 * grows with each times the payload's length (json-schema.ts, `runsInline`).
 */
export type SchemaShape = {
  expanded: number; work: number; recursive: boolean; patternInstructions: number; patternReach: number; formatReach: number;
};

/** Keywords checked value by value or name by name, whose size a check's cost grows with. */
const WEIGHED = ['enum', 'const', 'required', 'dependentRequired'] as const;

/** Characters of a WEIGHED keyword's value that weigh as much as checking one more subschema (measured: json-schema.ts). */
const WEIGHT_CHARS = 16;

/** What checking this one subschema at one payload value costs, in subschemas (SchemaShape's `work`). */
const weightOf = (node: Record<string, unknown>): number => {
  let chars = 0;
  for (const key of WEIGHED) if (node[key] !== undefined) chars += JSON.stringify(node[key]).length;
  return 1 + Math.ceil(chars / WEIGHT_CHARS);
};

/**
 * Formats whose check is linear in the string (anchored regexes without nested quantifiers, or
 * small functions): ajv-formats' date and time formats, uuid, ipv4, the number formats. Every
 * other format (url, uri, email, hostname, regex…) may backtrack: `url` took 130 ms on 8 KB.
 */
const LINEAR_FORMATS = new Set(['date', 'time', 'date-time', 'iso-time', 'iso-date-time', 'duration', 'uuid', 'ipv4', 'int32', 'int64', 'float', 'double', 'byte', 'binary', 'password']);

/**
 * "is not a valid regular expression" when JavaScript's own parser (the `u` flag, as JSON Schema's
 * ECMA-262 patterns) refuses it too: `(` was told it had lookaround or backreferences (a probe).
 * Constructing a RegExp parses it and runs nothing.
 */
function invalidRegExp(pattern: string): string | null {
  try {
    new RegExp(pattern, 'u');
    return null;
  } catch {
    return 'is not a valid regular expression';
  }
}

type Node = Record<string, unknown>;
const isObject = (v: unknown): v is Node => typeof v === 'object' && v !== null && !Array.isArray(v);

// Keywords whose values are subschemas, by how they apply: at the same payload value, or to
// values inside it. $defs/definitions hold subschemas that apply only through a $ref.
const SAME_ONE = ['not', 'if', 'then', 'else'];
const SAME_LIST = ['allOf', 'anyOf', 'oneOf'];
const SAME_MAP = ['dependentSchemas', 'dependencies'];
const DOWN_ONE = ['additionalProperties', 'propertyNames', 'additionalItems', 'contains', 'unevaluatedItems', 'unevaluatedProperties', 'items'];
const DOWN_LIST = ['prefixItems', 'items'];
const DOWN_MAP = ['properties', 'patternProperties'];
const DEFS = ['$defs', 'definitions'];

type Edge = { to: Node; down: boolean; path: string };

const problem = (path: string, message: string): SchemaProblem[] => [{ path, message }];

/** Size and nesting of a JSON value, without recursion (the value may be nested thousands deep). */
export function checkSizeAndDepth(schema: unknown, root: string): SchemaProblem[] | null {
  const stack: Array<[unknown, number]> = [[schema, 1]];
  let chars = 0;
  while (stack.length > 0) {
    const [value, depth] = stack.pop() as [unknown, number];
    if (depth > SCHEMA_LIMITS.maxDepth) return problem(root, `is nested more than ${SCHEMA_LIMITS.maxDepth} levels deep`);
    if (typeof value === 'string') chars += value.length + 2;
    else if (Array.isArray(value)) {
      chars += 2 + value.length;
      for (const item of value) stack.push([item, depth + 1]);
    } else if (isObject(value)) {
      chars += 2;
      for (const [key, item] of Object.entries(value)) {
        chars += key.length + 4;
        stack.push([item, depth + 1]);
      }
    } else chars += 5;
    if (chars > SCHEMA_LIMITS.maxBytes) return problem(root, `is larger than ${SCHEMA_LIMITS.maxBytes} characters of JSON`);
  }
  return null;
}

/** Every subschema of `node` with the path of its keyword, as the drafts define them. */
function children(node: Node, path: string): { same: Edge[]; down: Edge[]; defs: Edge[] } {
  const same: Edge[] = [];
  const down: Edge[] = [];
  const defs: Edge[] = [];
  const one = (list: Edge[], key: string, d: boolean) => {
    if (isObject(node[key])) list.push({ to: node[key], down: d, path: `${path}.${key}` });
  };
  const many = (list: Edge[], key: string, d: boolean) => {
    const value = node[key];
    if (Array.isArray(value)) value.forEach((v, i) => isObject(v) && list.push({ to: v, down: d, path: `${path}.${key}.${i}` }));
  };
  const map = (list: Edge[], key: string, d: boolean) => {
    const value = node[key];
    if (isObject(value)) for (const [k, v] of Object.entries(value)) if (isObject(v)) list.push({ to: v, down: d, path: `${path}.${key}.${k}` });
  };
  SAME_ONE.forEach((k) => one(same, k, false));
  SAME_LIST.forEach((k) => many(same, k, false));
  SAME_MAP.forEach((k) => map(same, k, false));
  DOWN_ONE.forEach((k) => one(down, k, true));
  DOWN_LIST.forEach((k) => many(down, k, true));
  DOWN_MAP.forEach((k) => map(down, k, true));
  DEFS.forEach((k) => map(defs, k, false));
  return { same, down, defs };
}

const ROOT_BASE = 'https://schema.invalid/root.json';

function resolveUri(ref: string, base: string): string | null {
  try {
    return new URL(ref, base).href;
  } catch {
    return null;
  }
}

function pointerTarget(resource: unknown, fragment: string): Node | null {
  let at: unknown = resource;
  for (const raw of fragment.split('/').slice(1)) {
    const token = decodeURIComponent(raw).replaceAll('~1', '/').replaceAll('~0', '~');
    if (Array.isArray(at)) at = at[Number(token)];
    else if (isObject(at) && Object.hasOwn(at, token)) at = at[token];
    else return null;
  }
  return isObject(at) ? at : null;
}

/**
 * Checks a schema against the limits before it is compiled: problems (paths under `root`), or
 * its shape (how many subschemas a payload value meets, whether it recurses through the payload).
 */
export function checkSchemaLimits(schema: Record<string, unknown>, root = 'schema'): { problems: SchemaProblem[] } | { shape: SchemaShape } {
  const sized = checkSizeAndDepth(schema, root);
  if (sized) return { problems: sized };

  // Pass 1: every subschema's base URI; resources by $id, anchors by URI#name; branching and patterns.
  const base = new Map<Node, string>();
  const paths = new Map<Node, string>();
  const resources = new Map<string, Node>([[ROOT_BASE, schema]]);
  const anchors = new Map<string, Node>();
  const dynamicAnchors = new Map<string, Node[]>();
  const pending: Array<[Node, string, string]> = [[schema, ROOT_BASE, root]];
  let patternInstructions = 0;
  const ownPatterns = new Map<Node, number>();
  while (pending.length > 0) {
    const [node, parentBase, path] = pending.pop() as [Node, string, string];
    if (paths.has(node)) continue;
    paths.set(node, path);
    let here = parentBase;
    if (typeof node.$id === 'string') {
      if (node.$id.startsWith('#')) anchors.set(`${parentBase.split('#')[0]}${node.$id}`, node);
      else {
        const uri = resolveUri(node.$id, parentBase);
        if (!uri) return { problems: problem(`${path}.$id`, 'is not a valid URI reference') };
        here = uri.split('#')[0] as string;
        resources.set(here, node);
      }
    }
    base.set(node, here);
    for (const key of ['$anchor', '$dynamicAnchor']) {
      const name = node[key];
      if (typeof name === 'string') anchors.set(`${here}#${name}`, node);
    }
    if (typeof node.$dynamicAnchor === 'string') {
      dynamicAnchors.set(node.$dynamicAnchor, [...(dynamicAnchors.get(node.$dynamicAnchor) ?? []), node]);
    }
    if (node.$recursiveAnchor === true) dynamicAnchors.set('$recursive', [...(dynamicAnchors.get('$recursive') ?? []), node]);
    for (const key of SAME_LIST) {
      const list = node[key];
      if (Array.isArray(list) && list.length > SCHEMA_LIMITS.maxBranches) {
        return { problems: problem(`${path}.${key}`, `has more than ${SCHEMA_LIMITS.maxBranches} entries`) };
      }
    }
    const patterns: Array<[string, unknown]> = [[`${path}.pattern`, node.pattern]];
    if (isObject(node.patternProperties)) for (const key of Object.keys(node.patternProperties)) patterns.push([`${path}.patternProperties.${key}`, key]);
    for (const [where, pattern] of patterns) {
      if (typeof pattern !== 'string') continue;
      try {
        const instructions = (compilePattern(pattern).re2().prog as { inst: unknown[] }).inst.length;
        patternInstructions += instructions;
        ownPatterns.set(node, (ownPatterns.get(node) ?? 0) + instructions);
      } catch (error) {
        const reason = String((error as Error).message).slice(0, 200);
        return { problems: problem(where, `${invalidRegExp(pattern) ?? 'is not a pattern the linear-time (RE2) engine accepts: no lookaround or backreferences'} (${reason})`) };
      }
    }
    const { same, down, defs } = children(node, path);
    for (const edge of [...same, ...down, ...defs]) pending.push([edge.to, here, edge.path]);
  }

  // Where each $ref, $dynamicRef and $recursiveRef leads (each at the same payload value).
  const refEdges = (node: Node): Edge[] | SchemaProblem[] => {
    const edges: Edge[] = [];
    const path = paths.get(node) as string;
    for (const key of ['$ref', '$dynamicRef', '$recursiveRef']) {
      const ref = node[key];
      if (typeof ref !== 'string') continue;
      const uri = resolveUri(ref, base.get(node) as string);
      const [resourceUri, fragment = ''] = (uri ?? '').split('#') as [string, string?];
      const resource = resources.get(resourceUri);
      const target = !resource ? null
        : fragment === '' || fragment.startsWith('/') ? pointerTarget(resource, fragment)
        : anchors.get(`${resourceUri}#${fragment}`) ?? null;
      if (!target) return problem(`${path}.${key}`, 'must point inside this schema (by JSON pointer, $anchor or an $id declared in it)');
      edges.push({ to: target, down: false, path: `${path}.${key}` });
      const dynamicName = key === '$recursiveRef' ? '$recursive' : key === '$dynamicRef' ? fragment : null;
      for (const other of dynamicName ? dynamicAnchors.get(dynamicName) ?? [] : []) edges.push({ to: other, down: false, path: `${path}.${key}` });
    }
    return edges;
  };

  // Pass 2: depth-first over applicators and refs. A loop made only of same-value edges never
  // ends; a loop through the payload (a tree schema) is fine, counted once.
  const expanded = new Map<Node, number>();
  const workOf = new Map<Node, number>();
  // What each subschema reaches when its $refs are followed: patterns' instructions and costly formats.
  const reach = new Map<Node, { patterns: number; formats: number }>();
  const onStack = new Map<Node, number>();
  const stack: Edge[] = [];
  let recursive = false;
  let refused: SchemaProblem[] | null = null;
  const visit = (node: Node): number => {
    const known = expanded.get(node);
    if (known !== undefined) return known;
    const reached = {
      patterns: ownPatterns.get(node) ?? 0,
      formats: typeof node.format === 'string' && !LINEAR_FORMATS.has(node.format) ? 1 : 0,
    };
    onStack.set(node, stack.length);
    const { same, down } = children(node, paths.get(node) ?? root);
    const refs = refEdges(node);
    if (refs.length > 0 && !('to' in (refs[0] as object))) {
      refused = refs as SchemaProblem[];
      return Infinity;
    }
    let total = 1;
    let work = weightOf(node);
    for (const edge of [...same, ...(refs as Edge[]), ...down]) {
      const at = onStack.get(edge.to);
      if (at !== undefined) {
        const loop = [...stack.slice(at), edge];
        if (!loop.some((e) => e.down)) {
          refused ??= problem(edge.path, 'makes a $ref loop that never descends into the payload (it would recurse forever)');
          return Infinity;
        }
        recursive = true;
        total += 1;
        work += 1;
        continue;
      }
      stack.push(edge);
      total += visit(edge.to);
      work += workOf.get(edge.to) ?? Infinity;
      stack.pop();
      const below = reach.get(edge.to);
      if (below) {
        reached.patterns += below.patterns;
        reached.formats += below.formats;
      }
      if (refused || total > SCHEMA_LIMITS.maxExpanded) break;
    }
    onStack.delete(node);
    expanded.set(node, total);
    workOf.set(node, work);
    reach.set(node, reached);
    return total;
  };
  const total = visit(schema);
  if (refused) return { problems: refused };
  if (total > SCHEMA_LIMITS.maxExpanded) {
    return { problems: problem(root, `expands to more than ${SCHEMA_LIMITS.maxExpanded} subschemas when its $refs are followed (too many branches)`) };
  }
  const reached = reach.get(schema) ?? { patterns: 0, formats: 0 };
  return { shape: { expanded: total, work: workOf.get(schema) ?? total, recursive, patternInstructions, patternReach: reached.patterns, formatReach: reached.formats } };
}
