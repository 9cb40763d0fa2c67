// The reference encoders of test/e2e/tokenizer_reference.sh: each file of a list encoded
// by an implementation independent of planc's, one line of space-separated ids per file
// (planc-tokenize's format).
//   tiktoken-gpt2, tiktoken-cl100k  js-tiktoken's gpt2 and cl100k_base encodings, no
//                                   special token allowed (one in a file is an error)
//   gpt-3-encoder                   OpenAI's GPT-2 encoder.py ported to JavaScript
// usage: node reference.js NODE_MODULES_DIR ENCODER LIST_FILE OUT_FILE
'use strict';
const fs = require('fs');

const [modules, encoderName, listFile, outFile] = process.argv.slice(2);
const need = (name) => require(require.resolve(name, { paths: [modules] }));

// gpt-3-encoder builds its output with Array.concat per pre-token, quadratic in a file's
// length, so it gets a file in chunks cut where no GPT-2 pre-token can straddle: after a
// '\n' that follows a non-space and precedes a non-space ("a\nb" is "a", "\n", "b"
// whether cut there or not; a space on either side would join the '\n' to it).
function chunks(text, size) {
  const out = [];
  let begin = 0;
  for (let i = begin + size; i < text.length - 1; ++i) {
    if (text[i] === '\n' && !/\s/u.test(text[i - 1]) && !/\s/u.test(text[i + 1])) {
      out.push(text.slice(begin, i + 1));
      begin = i + 1;
      i = begin + size;
    }
  }
  out.push(text.slice(begin));
  return out;
}

function encoder(name) {
  if (name === 'gpt-3-encoder') {
    const g = need('gpt-3-encoder');
    return (text) => chunks(text, 4096).flatMap((c) => g.encode(c));
  }
  const { Tiktoken } = need('js-tiktoken/lite');
  const ranks = { 'tiktoken-gpt2': 'js-tiktoken/ranks/gpt2', 'tiktoken-cl100k': 'js-tiktoken/ranks/cl100k_base' }[name];
  if (!ranks) {
    console.error(`reference.js: unknown encoder '${name}'`);
    process.exit(2);
  }
  const t = new Tiktoken(need(ranks).default || need(ranks));
  return (text) => t.encode(text, [], 'all');
}

const encode = encoder(encoderName);
const files = fs.readFileSync(listFile, 'utf8').split('\n').filter(Boolean);
const out = fs.openSync(outFile, 'w');
for (const file of files) {
  let ids;
  try {
    ids = encode(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    console.error(`reference.js (${encoderName}): ${file}: ${e.message}`);
    process.exit(1);
  }
  fs.writeSync(out, ids.join(' ') + '\n');
}
fs.closeSync(out);
