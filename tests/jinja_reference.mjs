// Renders chat templates with Hugging Face's JS Jinja engine (@huggingface/jinja)
// so tests/chat_template_parity_test.cpp can compare src/chat/jinja with it.
//
//   node tests/jinja_reference.mjs MODULE_DIR CASES_JSON
//
// MODULE_DIR: the unpacked @huggingface/jinja package (scripts/fetch_tokenizer_assets.sh
//             puts it in third_party/tokenizer/node_modules/@huggingface/jinja)
// CASES_JSON: [{"template_path": ..., "cases": [{"name": ..., "context": {...}}, ...]}, ...]
// stdout:     the same nesting, one entry per case, in order:
//             [[{"output": "..."} or {"error": "..."}, ...], ...]
// All templates and cases go through one node process: starting node costs
// more than rendering everything.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [moduleDir, casesPath] = process.argv.slice(2);
if (!casesPath) {
  console.error('usage: node jinja_reference.mjs MODULE_DIR CASES_JSON');
  process.exit(2);
}

const { Template } = await import(pathToFileURL(path.join(moduleDir, 'dist', 'index.js')).href);

const renderAll = ({ template_path, cases }) => {
  let template;
  try {
    template = new Template(fs.readFileSync(template_path, 'utf8'));
  } catch (e) {
    return cases.map(() => ({ error: String(e.message ?? e) }));
  }
  return cases.map(({ context }) => {
    try {
      return { output: template.render(context) };
    } catch (e) {
      return { error: String(e.message ?? e) };
    }
  });
};

const groups = JSON.parse(fs.readFileSync(casesPath, 'utf8'));
process.stdout.write(JSON.stringify(groups.map(renderAll)));
