// The corpus: glob patterns with `**`, the sha256sum manifest, and the checks
// every file passes before a byte of it is chunked.
#include "retrieval.h"
#include "status.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fnmatch.h>
#include <set>
#include <sys/stat.h>

namespace planrt::rag {
namespace {

bool hasMagic(const std::string &s) { return s.find_first_of("*?[") != std::string::npos; }

std::vector<std::string> splitSegments(const std::string &pattern) {
  std::vector<std::string> segs;
  size_t i = 0;
  while (i <= pattern.size()) {
    size_t j = pattern.find('/', i);
    if (j == std::string::npos)
      j = pattern.size();
    if (j > i)
      segs.push_back(pattern.substr(i, j - i));
    i = j + 1;
  }
  return segs;
}

std::string joinName(const std::string &dir, const std::string &name) {
  if (dir.empty())
    return name;
  return dir == "/" ? "/" + name : dir + "/" + name;
}

// Matches segments[k..] below `shown` (the path as the user will see it), whose
// real location is `real`. Hidden entries match only a pattern that starts with '.',
// as in the shell; `**` does not descend into symbolic links (no cycles).
void walk(const std::vector<std::string> &segs, size_t k, const std::string &shown, const std::string &real,
          std::set<std::string> &out) {
  struct stat st;
  if (k == segs.size()) {
    if (::stat(real.c_str(), &st) == 0 && S_ISREG(st.st_mode))
      out.insert(shown);
    return;
  }
  const std::string &seg = segs[k];
  if (seg == "**") {
    walk(segs, k + 1, shown, real, out); // zero directories
    DIR *d = ::opendir(real.c_str());
    if (!d)
      return;
    std::vector<std::string> names;
    while (dirent *e = ::readdir(d))
      if (e->d_name[0] != '.')
        names.push_back(e->d_name);
    ::closedir(d);
    for (const auto &name : names) {
      std::string r = joinName(real, name);
      if (::lstat(r.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        walk(segs, k, joinName(shown, name), r, out);
    }
    return;
  }
  if (!hasMagic(seg)) {
    std::string r = joinName(real, seg);
    if (k + 1 == segs.size() || (::stat(r.c_str(), &st) == 0 && S_ISDIR(st.st_mode)))
      walk(segs, k + 1, joinName(shown, seg), r, out);
    return;
  }
  DIR *d = ::opendir(real.c_str());
  if (!d)
    return;
  std::vector<std::string> names;
  while (dirent *e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..")
      continue;
    if (::fnmatch(seg.c_str(), name.c_str(), FNM_PERIOD) == 0)
      names.push_back(name);
  }
  ::closedir(d);
  for (const auto &name : names)
    walk(segs, k + 1, joinName(shown, name), joinName(real, name), out);
}

} // namespace

planrt_status expandGlobs(const std::vector<std::string> &patterns, const std::string &base,
                          std::vector<std::string> &files) {
  std::set<std::string> found;
  for (const auto &pattern : patterns) {
    if (pattern.empty())
      return fail(PLANRT_ERR_ARG, "an empty corpus pattern");
    bool absolute = pattern[0] == '/';
    std::string root = absolute ? "/" : resolvePath(base, ".");
    walk(splitSegments(pattern), 0, absolute ? "/" : "", root, found);
  }
  files.assign(found.begin(), found.end());
  return PLANRT_OK;
}

planrt_status readManifest(const std::string &path, std::map<std::string, std::string> &entries) {
  std::string text;
  if (planrt_status s = readFile(path, text))
    return s;
  std::string dir = dirName(path);
  size_t lineNo = 0, i = 0;
  while (i < text.size()) {
    size_t j = text.find('\n', i);
    if (j == std::string::npos)
      j = text.size();
    std::string line = text.substr(i, j - i);
    i = j + 1;
    ++lineNo;
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.empty() || line[0] == '#')
      continue;
    // "<64 hex><space><space or '*'><path>", as sha256sum writes it.
    bool ok = line.size() > 66 && line[64] == ' ' && (line[65] == ' ' || line[65] == '*');
    for (size_t k = 0; ok && k < 64; ++k)
      ok = std::isxdigit(static_cast<unsigned char>(line[k]));
    if (!ok)
      return fail(PLANRT_ERR_FORMAT, "%s:%zu: not a sha256sum line (\"<64 hex digits>  <path>\")", path.c_str(),
                  lineNo);
    std::string hash = line.substr(0, 64);
    std::transform(hash.begin(), hash.end(), hash.begin(), ::tolower);
    std::string file = resolvePath(dir, line.substr(66));
    auto [it, inserted] = entries.emplace(file, hash);
    if (!inserted && it->second != hash)
      return fail(PLANRT_ERR_FORMAT, "%s:%zu: %s is listed twice with different hashes", path.c_str(), lineNo,
                  line.substr(66).c_str());
  }
  return PLANRT_OK;
}

planrt_status loadCorpus(const planrt_retrieval_config &cfg, std::vector<SourceFile> &files, int progress) {
  std::string base = cfg.base_dir ? cfg.base_dir : "";
  std::vector<std::string> patterns(cfg.corpus, cfg.corpus + cfg.corpus_count);
  std::vector<std::string> names;
  if (planrt_status s = expandGlobs(patterns, base, names))
    return s;
  if (names.empty()) {
    std::string list;
    for (const auto &p : patterns)
      list += (list.empty() ? "" : ", ") + p;
    return fail(PLANRT_ERR_ARG, "empty corpus: no file matches %s", list.c_str());
  }
  std::map<std::string, std::string> manifest;
  std::string manifestPath;
  if (cfg.manifest && *cfg.manifest) {
    manifestPath = resolvePath(base, cfg.manifest);
    if (planrt_status s = readManifest(manifestPath, manifest))
      return s;
  }
  uint64_t limit = cfg.max_file_bytes ? cfg.max_file_bytes : (16u << 20);
  std::vector<std::string> refused;
  files.clear();
  for (size_t n = 0; n < names.size(); ++n) {
    if (progress)
      std::fprintf(stderr, "\rplanrt: reading %zu/%zu files", n + 1, names.size());
    SourceFile f;
    f.name = names[n];
    f.path = resolvePath(base, f.name);
    auto refuse = [&](const std::string &why) { refused.push_back(f.name + ": " + why); };
    struct stat st;
    if (::stat(f.path.c_str(), &st) != 0) {
      refuse(std::string("cannot stat: ") + std::strerror(errno));
      continue;
    }
    if (uint64_t(st.st_size) > limit) {
      refuse("is " + std::to_string(st.st_size) + " bytes, more than the limit of " + std::to_string(limit) +
             " bytes (max_file_bytes)");
      continue;
    }
    int err = 0;
    if (readFile(f.path, f.text, &err) != PLANRT_OK) {
      refuse(std::string("cannot read: ") + std::strerror(err));
      continue;
    }
    if (f.text.size() > limit) { // grew since stat
      refuse("is more than the limit of " + std::to_string(limit) + " bytes (max_file_bytes)");
      continue;
    }
    f.sha256 = sha256Hex(f.text);
    if (!manifestPath.empty()) {
      auto it = manifest.find(f.path);
      if (it == manifest.end()) {
        refuse("not in the manifest " + std::string(cfg.manifest));
        continue;
      }
      if (it->second != f.sha256) {
        refuse("sha256 " + f.sha256 + " differs from the manifest's " + it->second);
        continue;
      }
    }
    if (size_t nul = f.text.find('\0'); nul != std::string::npos) {
      refuse("binary file (a NUL byte at offset " + std::to_string(nul) + ")");
      continue;
    }
    if (size_t bad = invalidUtf8(f.text); bad != std::string_view::npos) {
      char b[8];
      std::snprintf(b, sizeof b, "0x%02x", static_cast<unsigned char>(f.text[bad]));
      refuse("not UTF-8 (byte " + std::string(b) + " at offset " + std::to_string(bad) + ")");
      continue;
    }
    files.push_back(std::move(f));
  }
  if (progress)
    std::fprintf(stderr, "\r\033[K");
  if (!refused.empty()) {
    std::string list;
    for (size_t k = 0; k < refused.size() && k < 12; ++k)
      list += "\n  " + refused[k];
    if (refused.size() > 12)
      list += "\n  and " + std::to_string(refused.size() - 12) + " more";
    return fail(PLANRT_ERR_FORMAT, "%zu of %zu corpus files refused; nothing was ingested:%s", refused.size(),
                names.size(), list.c_str());
  }
  return PLANRT_OK;
}

} // namespace planrt::rag
