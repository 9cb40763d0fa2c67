// Chunkers: a text is cut into units (tokens, sentences or paragraphs), and
// chunks are runs of units with an overlap. Byte ranges index the file exactly.
#include "retrieval.h"

#include <algorithm>
#include <cmath>

namespace planrt::rag {
namespace {

bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Is there a blank line (only whitespace) starting at the newline at i?
bool blankLineAfter(std::string_view t, size_t i) {
  for (size_t k = i + 1; k < t.size(); ++k) {
    if (t[k] == '\n')
      return true;
    if (!isSpace(t[k]))
      return false;
  }
  return false;
}

std::vector<Span> tokens(std::string_view t) {
  std::vector<Span> out;
  size_t i = 0, n = t.size();
  while (i < n) {
    while (i < n && isSpace(t[i]))
      ++i;
    if (i == n)
      break;
    size_t b = i;
    while (i < n && !isSpace(t[i]))
      ++i;
    out.push_back({b, i});
  }
  return out;
}

// A sentence ends after '.', '!' or '?' (and any closing quotes or brackets) that
// is followed by whitespace or the end, or at a blank line; leading and trailing
// whitespace is not part of it.
std::vector<Span> sentences(std::string_view t) {
  std::vector<Span> out;
  size_t i = 0, n = t.size();
  while (i < n) {
    while (i < n && isSpace(t[i]))
      ++i;
    if (i == n)
      break;
    size_t b = i, end = n;
    for (; i < n; ++i) {
      char c = t[i];
      if (c == '.' || c == '!' || c == '?') {
        size_t k = i + 1;
        while (k < n && (t[k] == '"' || t[k] == '\'' || t[k] == ')' || t[k] == ']'))
          ++k;
        if (k == n || isSpace(t[k])) {
          end = k;
          i = k;
          break;
        }
      } else if (c == '\n' && blankLineAfter(t, i)) {
        end = i;
        break;
      }
    }
    if (i >= n)
      i = n;
    while (end > b && isSpace(t[end - 1]))
      --end;
    out.push_back({b, end});
  }
  return out;
}

// Paragraphs are separated by blank lines.
std::vector<Span> paragraphs(std::string_view t) {
  std::vector<Span> out;
  size_t i = 0, n = t.size();
  while (i < n) {
    while (i < n && isSpace(t[i]))
      ++i;
    if (i == n)
      break;
    size_t b = i;
    while (i < n && !(t[i] == '\n' && blankLineAfter(t, i)))
      ++i;
    size_t end = i;
    while (end > b && isSpace(t[end - 1]))
      --end;
    out.push_back({b, end});
  }
  return out;
}

} // namespace

std::vector<Span> chunkUnits(planrt_chunk_kind kind, std::string_view text) {
  switch (kind) {
  case PLANRT_CHUNK_SENTENCES:
    return sentences(text);
  case PLANRT_CHUNK_PARAGRAPHS:
    return paragraphs(text);
  default:
    return tokens(text);
  }
}

std::vector<Span> chunkText(planrt_chunk_kind kind, std::string_view text, int64_t size, int64_t overlap) {
  std::vector<Span> units = chunkUnits(kind, text), out;
  if (size <= 0 || overlap < 0 || overlap >= size)
    return out; // checkConfig refuses these
  size_t step = size_t(size - overlap);
  for (size_t i = 0; i < units.size(); i += step) {
    size_t j = std::min(units.size(), i + size_t(size));
    out.push_back({units[i].begin, units[j - 1].end});
    if (j == units.size())
      break;
  }
  return out;
}

} // namespace planrt::rag

namespace planrt::rag {
namespace {

/// Whitespace-separated tokens in [begin, end) of `text`.
int64_t tokenCount(std::string_view text, const Span &s) {
  return int64_t(chunkUnits(PLANRT_CHUNK_TOKENS, text.substr(s.begin, s.end - s.begin)).size());
}

double cosine(const std::vector<double> &a, const std::vector<double> &b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  // No words on one side: no evidence for a cut.
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 1.0;
}

} // namespace

std::vector<Span> chunkSemantic(std::string_view text, int64_t size, double threshold, Embedder &embedder) {
  std::vector<Span> units = chunkUnits(PLANRT_CHUNK_SENTENCES, text), out;
  size_t n = units.size();
  if (n == 0 || size <= 0)
    return out;
  const size_t dim = size_t(embedder.dim()), window = 2;
  std::vector<std::vector<float>> emb(n, std::vector<float>(dim, 0.0f));
  std::vector<int64_t> tokens(n);
  for (size_t i = 0; i < n; ++i) {
    std::string_view s = text.substr(units[i].begin, units[i].end - units[i].begin);
    if (!embedder.embed(s, emb[i].data()))
      std::fill(emb[i].begin(), emb[i].end(), 0.0f);
    tokens[i] = tokenCount(text, units[i]);
  }
  // sim[i]: the boundary before sentence i.
  std::vector<double> sim(n, 1.0);
  for (size_t i = 1; i < n; ++i) {
    std::vector<double> before(dim, 0.0), after(dim, 0.0);
    for (size_t j = i - std::min(i, window); j < i; ++j)
      for (size_t d = 0; d < dim; ++d)
        before[d] += emb[j][d];
    for (size_t j = i; j < std::min(n, i + window); ++j)
      for (size_t d = 0; d < dim; ++d)
        after[d] += emb[j][d];
    sim[i] = cosine(before, after);
  }
  const int64_t minTokens = std::max<int64_t>(1, size / 4);
  size_t start = 0;
  int64_t count = tokens[0];
  auto cut = [&](size_t at) {
    out.push_back({units[start].begin, units[at - 1].end});
    start = at;
  };
  for (size_t i = 1; i < n; ++i) {
    if (count + tokens[i] > size) {
      // The least similar boundary that leaves the chunk a quarter of `size`.
      size_t best = i;
      int64_t before = 0;
      for (size_t b = start + 1; b <= i; ++b) {
        before += tokens[b - 1];
        if (before >= minTokens && sim[b] < sim[best])
          best = b;
      }
      cut(best);
      count = 0;
      for (size_t j = best; j <= i; ++j)
        count += tokens[j];
    } else if (sim[i] < threshold && count >= minTokens) {
      cut(i);
      count = tokens[i];
    } else {
      count += tokens[i];
    }
  }
  out.push_back({units[start].begin, units[n - 1].end});
  return out;
}

} // namespace planrt::rag
