// The import graph of src/, read with the TypeScript parser: every static import and export-from, every
// `import type`, and every dynamic `import("…")` named by a string literal. It fails on any import cycle and
// on an import that runs against the layering docs/architecture.md describes.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "..");
const SRC = join(ROOT, "src");

interface Edge {
  from: string;
  to: string;
  specifier: string;
  typeOnly: boolean;
  dynamic: boolean;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts") ? [path] : [];
  });
}

/** The src/ file a relative specifier names (`./x.js` is `./x.ts` under NodeNext), or undefined for packages and non-TS files. */
function resolveSpecifier(fromFile: string, specifier: string): string | undefined {
  if (!specifier.startsWith(".")) return undefined;
  const base = resolve(dirname(fromFile), specifier);
  const candidates = [base.replace(/\.(m?js)$/, ".ts"), base, `${base}.ts`, join(base, "index.ts")];
  return candidates.find((path) => path.endsWith(".ts") && existsSync(path));
}

function edgesOf(file: string): { edges: Edge[]; packages: string[] } {
  const text = readFileSync(file, "utf8");
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
  const edges: Edge[] = [];
  const packages: string[] = [];
  const add = (specifier: string, typeOnly: boolean, dynamic: boolean): void => {
    if (!specifier.startsWith(".")) {
      packages.push(specifier);
      return;
    }
    const to = resolveSpecifier(file, specifier);
    if (to) edges.push({ from: rel(file), to: rel(to), specifier, typeOnly, dynamic });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      const typeOnly =
        clause !== undefined && (clause.isTypeOnly || allTypeOnly(clause.namedBindings, clause.name));
      add(node.moduleSpecifier.text, typeOnly, false);
    } else if (
      ts.isExportDeclaration(node) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      const typeOnly =
        node.isTypeOnly ||
        (node.exportClause !== undefined &&
          ts.isNamedExports(node.exportClause) &&
          node.exportClause.elements.length > 0 &&
          node.exportClause.elements.every((e) => e.isTypeOnly));
      add(node.moduleSpecifier.text, typeOnly, false);
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      const expr = node.moduleReference.expression;
      if (ts.isStringLiteral(expr)) add(expr.text, node.isTypeOnly, false);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const [arg] = node.arguments;
      if (arg && (ts.isStringLiteral(arg) || ts.isNoSubstitutionTemplateLiteral(arg)))
        add(arg.text, false, true);
    } else if (
      ts.isImportTypeNode(node) &&
      ts.isLiteralTypeNode(node.argument) &&
      ts.isStringLiteral(node.argument.literal)
    ) {
      add(node.argument.literal.text, true, false);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return { edges, packages };
}

function allTypeOnly(
  bindings: ts.NamedImportBindings | undefined,
  defaultName: ts.Identifier | undefined,
): boolean {
  if (defaultName || !bindings || !ts.isNamedImports(bindings)) return false;
  return bindings.elements.length > 0 && bindings.elements.every((element) => element.isTypeOnly);
}

function rel(path: string): string {
  return relative(ROOT, path).split("\\").join("/");
}

/**
 * The files caught in cycles, one entry per strongly connected component, each shown as the shortest cycle through
 * its first file (a component can hold more cycles; breaking that one shows the next).
 */
function cycles(edges: Edge[]): string[][] {
  const next = new Map<string, Set<string>>();
  for (const edge of edges) {
    if (!next.has(edge.from)) next.set(edge.from, new Set());
    next.get(edge.from)!.add(edge.to);
  }
  // Tarjan's strongly connected components; each component of more than one file (or a file importing itself) holds a cycle.
  let index = 0;
  const indexOf = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const strongConnect = (v: string): void => {
    indexOf.set(v, index);
    low.set(v, index);
    index++;
    stack.push(v);
    onStack.add(v);
    for (const w of next.get(v) ?? []) {
      if (!indexOf.has(w)) {
        strongConnect(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, indexOf.get(w)!));
      }
    }
    if (low.get(v) === indexOf.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || next.get(v)?.has(v)) components.push(component.sort());
    }
  };
  for (const v of [...next.keys()].sort()) if (!indexOf.has(v)) strongConnect(v);
  // Show each component as the shortest cycle through its first file, found by breadth-first search.
  return components.map((component) => {
    const members = new Set(component);
    const start = component[0]!;
    const parent = new Map<string, string>();
    const queue = [start];
    while (queue.length > 0) {
      const v = queue.shift()!;
      for (const w of next.get(v) ?? []) {
        if (!members.has(w)) continue;
        if (w === start) {
          const path = [v];
          while (path[0] !== start) path.unshift(parent.get(path[0]!)!);
          return [...path, start];
        }
        if (!parent.has(w)) {
          parent.set(w, v);
          queue.push(w);
        }
      }
    }
    return component;
  });
}

const files = sourceFiles(SRC).sort();
const parsed = files.map((file) => ({ file: rel(file), ...edgesOf(file) }));
const edges = parsed.flatMap((entry) => entry.edges);

const show = (list: string[][]): string => list.map((cycle) => cycle.join(" → ")).join("\n");

/** The top-level room of a src/ file: its folder ("store"), or the file itself for one at the top ("errors.ts"). */
const roomOf = (file: string): string => file.split("/")[1]!;
const inRooms = (file: string, rooms: readonly string[]): boolean => rooms.includes(roomOf(file));

/** The src/ imports from `rooms` into `forbidden`, as "from → to" lines. */
function importsInto(rooms: readonly string[], forbidden: readonly string[]): string[] {
  return edges
    .filter((edge) => inRooms(edge.from, rooms) && inRooms(edge.to, forbidden))
    .map(
      (edge) => `${edge.from} → ${edge.to}${edge.dynamic ? " (dynamic)" : edge.typeOnly ? " (type)" : ""}`,
    );
}

/** The packages `rooms` import that match `forbidden`, as "file → package" lines. */
function packagesOf(rooms: readonly string[], forbidden: RegExp): string[] {
  return parsed
    .filter((entry) => inRooms(entry.file, rooms))
    .flatMap((entry) =>
      entry.packages.filter((name) => forbidden.test(name)).map((name) => `${entry.file} → ${name}`),
    );
}

const ROOMS = [...new Set(files.map((file) => roomOf(rel(file))))];
const except = (...keep: string[]): string[] => ROOMS.filter((room) => !keep.includes(room));
/** The surfaces: the CLI, the HTTP API and the inbox. */
const SURFACES = ["cli", "api", "inbox"];
/** The offline demo (the Bitrix24 emulator and the offline model) and the one production file that picks it as the default. */
const OFFLINE_DEMO = "offline-demo";
const OFFLINE_DOOR = "src/runtime/offline-default.ts";
/** LangGraph and LangChain, I/O modules of Node, database drivers, servers and the MCP SDK. */
const NODE_IO = [
  "fs",
  "fs/promises",
  "net",
  "http",
  "https",
  "http2",
  "tls",
  "dgram",
  "child_process",
  "worker_threads",
];
const RUNTIME_PACKAGES = new RegExp(
  `^(@langchain/|@modelcontextprotocol/|@hono/|hono$|pg$|better-sqlite3$|(node:)?(${NODE_IO.join("|")})$)`,
);

describe("the import graph of src/", () => {
  it("reads every file and finds its imports", () => {
    expect(files.length).toBeGreaterThan(100);
    expect(edges.some((edge) => edge.dynamic)).toBe(true);
    expect(edges.some((edge) => edge.typeOnly)).toBe(true);
  });

  it("has no import cycle, counting type-only imports", () => {
    expect(show(cycles(edges))).toBe("");
  });

  it("keeps the pure core pure: envelope/ imports only envelope/ and text/, and no LangGraph, I/O, database or server", () => {
    expect(ROOMS).toContain("envelope");
    expect(importsInto(["envelope"], except("envelope", "text"))).toEqual([]);
    expect(packagesOf(["envelope"], RUNTIME_PACKAGES)).toEqual([]);
  });

  it("keeps text/, config/ and the Bitrix24 client below everything else", () => {
    expect(importsInto(["text"], except("text"))).toEqual([]);
    expect(importsInto(["config"], except("config", "errors.ts"))).toEqual([]);
    expect(importsInto(["bitrix24"], except("bitrix24"))).toEqual([]);
  });

  it("keeps the journal (store/) below the gate, executor, graph, portal tools and surfaces", () => {
    expect(
      importsInto(
        ["store"],
        ["graph", "nodes", "executor", "runtime", "tools", "evidence", "auth", "app", ...SURFACES],
      ),
    ).toEqual([]);
  });

  it("keeps hitl/ and executor/ below the nodes, the app and the surfaces; the executor uses no LangGraph", () => {
    expect(importsInto(["hitl"], ["nodes", "executor", "auth", "app", ...SURFACES])).toEqual([]);
    expect(importsInto(["executor"], ["graph", "nodes", "app", ...SURFACES])).toEqual([]);
    expect(packagesOf(["executor"], /^@langchain\//)).toEqual([]);
  });

  it("keeps conversation/ between the graph's state and the nodes: it imports no node, the app or a surface, and nothing below the nodes imports it", () => {
    expect(ROOMS).toContain("conversation");
    expect(importsInto(["conversation"], ["nodes", "app", ...SURFACES])).toEqual([]);
    expect(
      importsInto(["hitl", "executor", "evidence", "auth", "store", "tools", "runtime"], ["conversation"]),
    ).toEqual([]);
  });

  it("keeps hitl/ and evidence/ below the graph: they read its state through hitl/thread-mirror.ts, and a checkpoint through a reader they are given", () => {
    expect(importsInto(["hitl", "evidence"], ["graph"])).toEqual([]);
  });

  it("keeps auth/ below the graph: the API server's wiring (src/api/served-auth.ts) gives it the served graph's checkpoints", () => {
    expect(importsInto(["auth"], ["graph"])).toEqual([]);
  });

  it("keeps the offline demo apart: only runtime/offline-default.ts enters it, and it imports no production room", () => {
    expect(ROOMS).toContain("offline-demo");
    const entries = edges.filter(
      (edge) => roomOf(edge.to) === OFFLINE_DEMO && roomOf(edge.from) !== OFFLINE_DEMO,
    );
    expect(
      entries.filter((edge) => edge.from !== OFFLINE_DOOR).map((edge) => `${edge.from} → ${edge.to}`),
    ).toEqual([]);
    expect(entries.map((edge) => edge.from)).toContain(OFFLINE_DOOR);
    expect(importsInto([OFFLINE_DEMO], except(OFFLINE_DEMO))).toEqual([]);
  });

  it("lets only the surfaces import the surfaces; the HTTP API never reaches into the CLI (the CLI prints)", () => {
    expect(importsInto(except(...SURFACES), SURFACES)).toEqual([]);
    expect(importsInto(["inbox", "api"], ["cli"])).toEqual([]);
  });

  it("keeps the records of an action's life and its outcome flags in the core: store/ and hitl/ import neither hitl/ records nor evidence/", () => {
    expect(importsInto(["store"], ["hitl", "evidence"])).toEqual([]);
    expect(importsInto(["hitl"], ["evidence"])).toEqual([]);
  });

  it("builds the API server's deps in one place, for the modules the server loads itself; nodes get theirs from the run's config", () => {
    const builders = edges
      .filter((edge) => edge.to === "src/runtime/server-deps.ts")
      .map((edge) => edge.from);
    expect([...new Set(builders)].sort()).toEqual([
      "src/api/served-graph.ts",
      "src/auth/auth.ts",
      "src/inbox/mount.ts",
    ]);
  });
});
