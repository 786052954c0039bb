// Encodes a corpus with Hugging Face's reference tokenizer (@huggingface/tokenizers,
// pure JS) so tests/tokenizer_test.cpp can compare deltagen's ids with it.
//
//   node tests/tokenizer_reference.mjs MODULE_DIR TOKENIZER_DIR CORPUS_JSON OUT_JSON
//
// MODULE_DIR:    the unpacked @huggingface/tokenizers package
//                (scripts/fetch_tokenizer_assets.sh puts it in
//                third_party/tokenizer/node_modules/@huggingface/tokenizers)
// TOKENIZER_DIR: folder with tokenizer.json and tokenizer_config.json
// CORPUS_JSON:   [{"name": ..., "text": ...} or {"name": ..., "decode_ids": [...]}, ...]
// OUT_JSON:      one entry per input, in order:
//                text:       {"name": ..., "ids": [...], "decoded": ..., "is_nfc": bool}
//                decode_ids: {"name": ..., "decoded": ...}
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [moduleDir, tokenizerDir, corpusPath, outPath] = process.argv.slice(2);
if (!outPath) {
  console.error('usage: node tokenizer_reference.mjs MODULE_DIR TOKENIZER_DIR CORPUS_JSON OUT_JSON');
  process.exit(2);
}

const entry = path.join(moduleDir, 'dist', 'tokenizers.mjs');
const { Tokenizer } = await import(pathToFileURL(entry).href);

const readJson = (file) => JSON.parse(fs.readFileSync(file, 'utf8'));
const configPath = path.join(tokenizerDir, 'tokenizer_config.json');
const tokenizer = new Tokenizer(
  readJson(path.join(tokenizerDir, 'tokenizer.json')),
  fs.existsSync(configPath) ? readJson(configPath) : {},
);

// decode() refuses an empty list.
const decode = (ids) => (ids.length ? tokenizer.decode(ids, { clean_up_tokenization_spaces: false }) : '');

const results = readJson(corpusPath).map(({ name, text, decode_ids }) => {
  if (decode_ids !== undefined) return { name, decoded: decode(decode_ids) };
  const ids = tokenizer.encode(text).ids;
  return { name, ids, decoded: decode(ids), is_nfc: text.normalize('NFC') === text };
});
fs.writeFileSync(outPath, JSON.stringify(results));
