/**
 * Each module's face: the names it exports, and who imports each. Read from the
 * import and export declarations of every TypeScript file of the project (no
 * type check), so that test/unit/module-faces.test.ts can hold src/ to
 * "export only what another module imports", and say so for a test-only export.
 */
import { readdirSync, readFileSync, type Stats, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";

export interface ExportedName {
  /** The exporting file, relative to the root. */
  file: string;
  name: string;
  /** Files (relative) that import the name, or import the whole module as a namespace. */
  importers: string[];
  /** The comments just before the declaration, joined. */
  leadingComment: string;
  /** A type (interface, alias) rather than a value. */
  isType: boolean;
  /** Named in the signature of another name the file exports: part of its face even unimported. */
  inSignature: boolean;
}

const SOURCE_DIRS = ["src", "test", "bench", "scripts"];

function tsFiles(dir: string): string[] {
  let out: string[] = [];
  for (const entry of readdirSync(dir)) {
    if (entry === "node_modules") continue;
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) out = out.concat(tsFiles(path));
    else if (entry.endsWith(".ts") && !entry.endsWith(".d.ts")) out.push(path);
  }
  return out;
}

function parse(path: string): ts.SourceFile {
  return ts.createSourceFile(path, readFileSync(path, "utf8"), ts.ScriptTarget.Latest, true);
}

function hasExportModifier(node: ts.Node): boolean {
  return (
    ts.canHaveModifiers(node) &&
    (ts.getModifiers(node) ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword)
  );
}

function leadingComment(sf: ts.SourceFile, node: ts.Node): string {
  const text = sf.getFullText();
  return (ts.getLeadingCommentRanges(text, node.getFullStart()) ?? [])
    .map((r) => text.slice(r.pos, r.end))
    .join("\n");
}

/**
 * What callers of an exported declaration see: a function's parameters and
 * return type, a class's heritage and non-private member signatures, an
 * interface or alias whole, a variable's annotation. Bodies are insides.
 */
function signatureText(sf: ts.SourceFile, node: ts.Node): string {
  const text = (n: ts.Node | undefined) => (n ? n.getText(sf) : "");
  if (ts.isFunctionDeclaration(node))
    return node.parameters.map(text).join(",") + text(node.type) + text(node.typeParameters?.[0]);
  if (ts.isClassDeclaration(node))
    return [
      ...(node.heritageClauses ?? []).map(text),
      ...node.members
        .filter(
          (m) =>
            !(ts.getModifiers(m as ts.HasModifiers) ?? []).some(
              (mod) => mod.kind === ts.SyntaxKind.PrivateKeyword,
            ) && !(m.name && ts.isPrivateIdentifier(m.name)),
        )
        .map((m) =>
          ts.isMethodDeclaration(m) || ts.isConstructorDeclaration(m) || ts.isAccessor(m)
            ? m.parameters.map(text).join(",") + text(m.type)
            : ts.isPropertyDeclaration(m)
              ? text(m.type)
              : "",
        ),
    ].join(" ");
  if (ts.isVariableStatement(node))
    return node.declarationList.declarations.map((d) => text(d.type)).join(" ");
  if (ts.isEnumDeclaration(node)) return "";
  return text(node);
}

/** The names a file exports by declaration (`export function f`, `export const a, b`, ...). */
function declaredExports(sf: ts.SourceFile): { name: string; node: ts.Node }[] {
  const out: { name: string; node: ts.Node }[] = [];
  for (const st of sf.statements) {
    if (!hasExportModifier(st)) continue;
    if (ts.isVariableStatement(st)) {
      for (const d of st.declarationList.declarations)
        if (ts.isIdentifier(d.name)) out.push({ name: d.name.text, node: st });
    } else if (
      (ts.isFunctionDeclaration(st) ||
        ts.isClassDeclaration(st) ||
        ts.isInterfaceDeclaration(st) ||
        ts.isTypeAliasDeclaration(st) ||
        ts.isEnumDeclaration(st)) &&
      st.name
    ) {
      const isDefault = (ts.getModifiers(st) ?? []).some(
        (m) => m.kind === ts.SyntaxKind.DefaultKeyword,
      );
      out.push({ name: isDefault ? "default" : st.name.text, node: st });
    }
  }
  return out;
}

/** A module specifier resolved to a project file, or undefined (a package, node:...). */
function resolveSpecifier(fromFile: string, spec: string): string | undefined {
  if (!spec.startsWith(".")) return undefined;
  const base = resolve(dirname(fromFile), spec);
  for (const candidate of [
    base,
    base.replace(/\.js$/, ".ts"),
    `${base}.ts`,
    join(base, "index.ts"),
  ])
    if (candidate.endsWith(".ts") && safeIsFile(candidate)) return candidate;
  return undefined;
}

function safeIsFile(path: string): boolean {
  return statOrUndefined(path)?.isFile() ?? false;
}

function safeIsDir(path: string): boolean {
  return statOrUndefined(path)?.isDirectory() ?? false;
}

function statOrUndefined(path: string): Stats | undefined {
  try {
    return statSync(path);
  } catch {
    return undefined;
  }
}

/** Every string literal that names a module: static imports/exports, import(), and scripts handed to a child. */
function importedNames(
  sf: ts.SourceFile,
  onImport: (target: string, names: string[] | "*") => void,
): void {
  const visit = (node: ts.Node): void => {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      const target = resolveSpecifier(sf.fileName, node.moduleSpecifier.text);
      if (target) onImport(target, namesOf(node));
    } else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] &&
      ts.isStringLiteralLike(node.arguments[0])
    ) {
      const target = resolveSpecifier(sf.fileName, node.arguments[0].text);
      if (target) onImport(target, "*");
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
}

function namesOf(node: ts.ImportDeclaration | ts.ExportDeclaration): string[] | "*" {
  if (ts.isExportDeclaration(node)) {
    if (!node.exportClause || !ts.isNamedExports(node.exportClause)) return "*";
    return node.exportClause.elements.map((e) => (e.propertyName ?? e.name).text);
  }
  const clause = node.importClause;
  if (!clause) return [];
  const names: string[] = clause.name ? ["default"] : [];
  const bindings = clause.namedBindings;
  if (bindings && ts.isNamespaceImport(bindings)) return "*";
  if (bindings) for (const e of bindings.elements) names.push((e.propertyName ?? e.name).text);
  return names;
}

/**
 * Scripts run in a child (`tsx -e`, a worker's source) name modules inside a
 * string: `from "./src/x.ts"`, relative to the root. Counted as whole-module use.
 */
function modulesNamedInStrings(root: string, text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/from \\?["'](\.\/(?:src|test|bench)\/[^"'\\]+)\\?["']/g)) {
    const target = resolveSpecifier(join(root, "x.ts"), m[1] as string);
    if (target) out.push(target);
  }
  return out;
}

/** Every name exported by a file under `dir` (relative to root), with its importers. */
export function moduleFaces(root: string, dir = "src"): ExportedName[] {
  const files = SOURCE_DIRS.flatMap((d) =>
    safeIsDir(join(root, d)) ? tsFiles(join(root, d)) : [],
  );
  const importers = new Map<string, Map<string, Set<string>>>();
  const note = (target: string, name: string, from: string) => {
    const byName = importers.get(target) ?? new Map<string, Set<string>>();
    importers.set(target, byName);
    const set = byName.get(name) ?? new Set<string>();
    byName.set(name, set);
    set.add(from);
  };
  const sources = new Map<string, ts.SourceFile>();
  for (const file of files) {
    const sf = parse(file);
    sources.set(file, sf);
    importedNames(sf, (target, names) => {
      if (target === file) return;
      for (const name of names === "*" ? ["*"] : names) note(target, name, file);
    });
    for (const target of modulesNamedInStrings(root, sf.getFullText()))
      if (target !== file) note(target, "*", file);
  }
  const out: ExportedName[] = [];
  const under = `${join(root, dir)}/`;
  for (const [file, sf] of sources) {
    if (!file.startsWith(under)) continue;
    const byName = importers.get(file);
    const exported = declaredExports(sf);
    const signatures = exported.map(({ name, node }) => ({ name, text: signatureText(sf, node) }));
    for (const { name, node } of exported) {
      const users = new Set([...(byName?.get(name) ?? []), ...(byName?.get("*") ?? [])]);
      out.push({
        file: relative(root, file),
        name,
        importers: [...users].map((u) => relative(root, u)).sort(),
        leadingComment: leadingComment(sf, node),
        isType: ts.isInterfaceDeclaration(node) || ts.isTypeAliasDeclaration(node),
        inSignature: signatures.some(
          (s) => s.name !== name && new RegExp(`\\b${name}\\b`).test(s.text),
        ),
      });
    }
  }
  return out;
}
