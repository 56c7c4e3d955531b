/**
 * Where a value sits in a JSON text: a small scanner that walks the text once and records the line
 * and column of every value by its path, so a validation issue ("operations.update_task.ttlSeconds")
 * can point at the line a person has to edit. Also turns JSON.parse's syntax errors into a line and
 * column. No dependency; it assumes the text already parsed as JSON.
 */

export interface TextPosition {
  line: number;
  column: number;
}

/** Line and column (both from 1) of a character offset. */
export function positionOf(text: string, offset: number): TextPosition {
  let line = 1;
  let lineStart = 0;
  for (let i = 0; i < offset && i < text.length; i++) {
    if (text[i] === "\n") {
      line++;
      lineStart = i + 1;
    }
  }
  return { line, column: offset - lineStart + 1 };
}

const key = (path: readonly (string | number)[]) => JSON.stringify(path.map(String));

/**
 * Positions of every value (and, under `key:` entries, every object key) in a JSON text, by path.
 * A path's value position is where the value starts; its key position is where its key starts.
 */
export function jsonPositions(text: string): { value: Map<string, number>; key: Map<string, number> } {
  const values = new Map<string, number>();
  const keys = new Map<string, number>();
  let i = 0;
  const ws = () => {
    while (i < text.length && /\s/.test(text[i]!)) i++;
  };
  const str = (): string => {
    const start = i;
    i++; // opening quote
    while (i < text.length && text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
    i++;
    return JSON.parse(text.slice(start, i)) as string;
  };
  const value = (path: (string | number)[]): void => {
    ws();
    values.set(key(path), i);
    const c = text[i];
    if (c === "{" || c === "[") {
      const close = c === "{" ? "}" : "]";
      i++;
      ws();
      if (text[i] === close) return void i++;
      for (let n = 0; ; n++) {
        ws();
        let at: string | number = n;
        if (c === "{") {
          const start = i;
          at = str();
          keys.set(key([...path, at]), start);
          ws();
          i++; // colon
        }
        value([...path, at]);
        ws();
        if (text[i] !== ",") return void i++; // closing brace or bracket
        i++;
      }
    }
    if (c === '"') return void str();
    while (i < text.length && !/[\s,\]}]/.test(text[i]!)) i++;
  };
  value([]);
  return { value: values, key: keys };
}

/**
 * The position to show for an issue at `path`: the value itself when it exists; for a key that is not
 * allowed or whose value is missing, the object holding it (an unknown key: the key itself).
 */
export function locate(
  text: string,
  path: readonly (string | number)[],
  positions = jsonPositions(text),
): TextPosition {
  for (let n = path.length; n >= 0; n--) {
    const p = path.slice(0, n);
    const at = positions.value.get(key(p)) ?? positions.key.get(key(p));
    if (at !== undefined) return positionOf(text, at);
  }
  return { line: 1, column: 1 };
}

/** JSON.parse's syntax error as "line L, column C: message" (Node 20 reports "at position N"). */
export function syntaxErrorAt(
  text: string,
  error: Error,
): { position: TextPosition | null; message: string } {
  const m = /at position (\d+)/.exec(error.message) ?? /line (\d+) column (\d+)/.exec(error.message);
  if (m && m.length === 2)
    return {
      position: positionOf(text, Number(m[1])),
      message: error.message.replace(/ in JSON at position \d+.*$/, ""),
    };
  if (m && m.length === 3)
    return {
      position: { line: Number(m[1]), column: Number(m[2]) },
      message: error.message.replace(/ \(line \d+ column \d+\)$/, ""),
    };
  return { position: text.trim() === "" ? { line: 1, column: 1 } : null, message: error.message };
}
