// How an npm script of package.json starts node: its leading environment assignments and the
// words after `node`, so that the benches and tests start a role exactly as `npm start`,
// `npm run web` and `npm run worker` do. The scripts have the form
// `[NAME=value | NAME=${NAME:-value}]... [exec] node <flags> src/main.ts <role>`.
import { readFileSync } from 'node:fs';
import path from 'node:path';

export type NodeScript = {
  /** The script's environment assignments, as sh would expand them against `env`. */
  env: Record<string, string>;
  /** The words after `node`: its flags, then `src/main.ts` and the role. */
  args: string[];
};

const ASSIGNMENT = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/;
const DEFAULTED = /^\$\{([A-Za-z_][A-Za-z0-9_]*):-([^}$]*)\}$/;

/** Parses one script; throws when it is not of the form above (so a changed script is noticed). */
export function parseNodeScript(script: string, env: NodeJS.ProcessEnv = process.env): NodeScript {
  const words = script.trim().split(/\s+/);
  const assigned: Record<string, string> = {};
  let i = 0;
  for (let m = ASSIGNMENT.exec(words[i] ?? ''); m; m = ASSIGNMENT.exec(words[i] ?? '')) {
    const [, name = '', value = ''] = m;
    const defaulted = DEFAULTED.exec(value);
    if (defaulted) assigned[name] = env[defaulted[1] ?? ''] || (defaulted[2] ?? '');
    else if (/[$`"'\\]/.test(value)) throw new Error(`unsupported assignment in script: ${script}`);
    else assigned[name] = value;
    i += 1;
  }
  if (words[i] === 'exec') i += 1;
  if (words[i] !== 'node') throw new Error(`the script is not "[NAME=value]... [exec] node ...": ${script}`);
  return { env: assigned, args: words.slice(i + 1) };
}

/** The named script of the package.json in `dir`. */
export function readNodeScript(dir: string, name: string, env: NodeJS.ProcessEnv = process.env): NodeScript {
  const { scripts } = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  return parseNodeScript(scripts[name] ?? '', env);
}

/** The script's Node flags: its words after `node`, up to `src/main.ts`. */
export function nodeFlagsOf(script: NodeScript): string[] {
  const main = script.args.indexOf('src/main.ts');
  return main < 0 ? script.args : script.args.slice(0, main);
}
