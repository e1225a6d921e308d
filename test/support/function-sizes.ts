import ts from 'typescript';

/** A function's place and size: `ownLines` leaves out the lines of the functions nested in it. */
export interface FunctionSize {
  file: string;
  name: string;
  line: number;
  ownLines: number;
}

function isFunction(node: ts.Node): node is ts.FunctionLikeDeclaration {
  return (
    ts.isFunctionDeclaration(node) ||
    ts.isFunctionExpression(node) ||
    ts.isArrowFunction(node) ||
    ts.isMethodDeclaration(node) ||
    ts.isConstructorDeclaration(node) ||
    ts.isGetAccessorDeclaration(node) ||
    ts.isSetAccessorDeclaration(node)
  );
}

/** What a reader calls the function: its own name, else the variable or property it is bound to. */
function nameOf(node: ts.FunctionLikeDeclaration, source: ts.SourceFile): string {
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  if (node.name !== undefined) return node.name.getText(source);
  const parent = node.parent;
  if (
    (ts.isVariableDeclaration(parent) ||
      ts.isPropertyAssignment(parent) ||
      ts.isPropertyDeclaration(parent)) &&
    parent.name !== undefined
  ) {
    return parent.name.getText(source);
  }
  return `<anonymous>`;
}

/** Every function of `text`, with the lines it has of its own. */
export function functionSizes(file: string, text: string): FunctionSize[] {
  const kind = file.endsWith('.tsx') ? ts.ScriptKind.TSX : ts.ScriptKind.TS;
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, kind);
  const lineOf = (pos: number) => source.getLineAndCharacterOfPosition(pos).line;
  const span = (node: ts.Node) => lineOf(node.getEnd()) - lineOf(node.getStart(source)) + 1;
  const sizes: FunctionSize[] = [];
  // Returns the lines `node`'s subtree spends in functions (the outermost ones met below it).
  const visit = (node: ts.Node): number => {
    if (isFunction(node)) {
      let nested = 0;
      node.forEachChild((child) => {
        nested += visit(child);
      });
      sizes.push({
        file,
        name: nameOf(node, source),
        line: lineOf(node.getStart(source)) + 1,
        ownLines: span(node) - nested,
      });
      return span(node);
    }
    let inFunctions = 0;
    node.forEachChild((child) => {
      inFunctions += visit(child);
    });
    return inFunctions;
  };
  visit(source);
  return sizes;
}
