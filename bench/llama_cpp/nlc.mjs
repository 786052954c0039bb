// Locate and load node-llama-cpp from the install cache outside the repository.
// Search order: $LLAMAPAIR_DIR, ~/.cache/deltagen/llama_cpp (each must hold
// node_modules/node-llama-cpp, installed from bench/llama_cpp/package.json; see README.md).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

export function nlcDir() {
  const cands = [process.env.LLAMAPAIR_DIR, path.join(os.homedir(), '.cache/deltagen/llama_cpp')]
    .filter(Boolean);
  for (const d of cands) {
    if (fs.existsSync(path.join(d, 'node_modules/node-llama-cpp/package.json'))) return d;
  }
  throw new Error(`node-llama-cpp not found in ${cands.join(', ')}: install it as bench/llama_cpp/README.md says`);
}

export async function importNlc() {
  const dir = nlcDir();
  const pkgDir = path.join(dir, 'node_modules/node-llama-cpp');
  const version = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8')).version;
  const mod = await import(pathToFileURL(path.join(pkgDir, 'dist/index.js')).href);
  return { mod, version, dir };
}

// CPU-only llama.cpp from the prebuilt binaries; never builds or downloads anything.
export async function cpuLlama(mod, { threads, logLevel = 'warn' } = {}) {
  return mod.getLlama({
    gpu: false,
    build: 'never',
    usePrebuiltBinaries: true,
    skipDownload: true,
    maxThreads: threads,
    logLevel,
  });
}
