/*
 * A small well-formedness check for generated markup (no XML parser is installed):
 * every tag closes in order, attributes are quoted, entities are known. Void HTML
 * elements are allowed unclosed outside SVG.
 */

const VOID_HTML = new Set(["meta", "br", "hr", "img", "input", "link"]);
const TAG = /<(\/?)([a-zA-Z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*(\/?)>/y;

export function markupProblems(markup: string): string[] {
  const problems: string[] = [];
  const stack: string[] = [];
  let i = 0;
  while (i < markup.length) {
    const lt = markup.indexOf("<", i);
    const chunk = markup.slice(i, lt === -1 ? markup.length : lt);
    for (const entity of chunk.match(/&[^;\s]*;?/g) ?? []) {
      if (!/^&(amp|lt|gt|quot|#39|#\d+);$/.test(entity)) problems.push(`bad entity ${entity}`);
    }
    if (chunk.includes(">")) problems.push(`stray ">" near ${JSON.stringify(chunk.slice(0, 40))}`);
    if (lt === -1) break;
    if (markup.startsWith("<!doctype", lt) || markup.startsWith("<!DOCTYPE", lt)) {
      i = markup.indexOf(">", lt) + 1;
      continue;
    }
    TAG.lastIndex = lt;
    const m = TAG.exec(markup);
    if (m === null) {
      problems.push(`malformed tag at ${lt}: ${JSON.stringify(markup.slice(lt, lt + 60))}`);
      break;
    }
    const [, closing, name, , selfClosing] = m as unknown as [string, string, string, string, string];
    if (closing) {
      const open = stack.pop();
      if (open !== name) problems.push(`</${name}> closes <${open ?? "nothing"}>`);
    } else if (!selfClosing && !(VOID_HTML.has(name) && !stack.includes("svg"))) {
      stack.push(name);
    }
    i = TAG.lastIndex;
    if (name === "style" && !closing) {
      const end = markup.indexOf("</style>", i);
      i = end === -1 ? markup.length : end;
    }
  }
  if (stack.length > 0) problems.push(`unclosed: ${stack.join(" > ")}`);
  return problems;
}
