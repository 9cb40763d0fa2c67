/* The main that `planc build` generates for a `retrieval` declaration, written by
 * hand: it fills the configuration and calls planrt_retrieval_main. For the test,
 * a few fields come from the environment (RAG_BASE, RAG_GRAPH, RAG_FACTORY,
 * RAG_CHUNK, RAG_GUARD, RAG_MAX_BYTES). */
#include "planrt_retrieval.h"

#include <stdlib.h>
#include <string.h>

static const char *env(const char *name, const char *fallback) {
  const char *v = getenv(name);
  return v && *v ? v : fallback;
}

int main(int argc, char **argv) {
  static const char *corpus[] = {"docs/**/*.md", "docs/*.txt"};
  planrt_retrieval_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.graph = env("RAG_GRAPH", "docs");
  cfg.plan_file = "docs.plan";
  cfg.plan_line = 3;
  cfg.base_dir = env("RAG_BASE", NULL);
  cfg.corpus = corpus;
  cfg.corpus_count = 2;
  cfg.manifest = "docs/MANIFEST.sha256";
  cfg.max_file_bytes = (uint64_t)atoll(env("RAG_MAX_BYTES", "0"));
  cfg.chunk = strcmp(env("RAG_CHUNK", "tokens"), "paragraphs") == 0 ? PLANRT_CHUNK_PARAGRAPHS : PLANRT_CHUNK_TOKENS;
  cfg.chunk_size = 40;
  cfg.chunk_overlap = 8;
  cfg.embed = PLANRT_EMBED_HASHING;
  cfg.embed_dim = 256;
  cfg.index_factory = env("RAG_FACTORY", "Flat");
  cfg.metric = PLANRT_METRIC_IP;
  cfg.nprobe = 4;
  cfg.search = PLANRT_SEARCH_HYBRID;
  cfg.vector_weight = 0.5;
  cfg.keyword_weight = 0.5;
  cfg.top = 5;
  cfg.fusion = PLANRT_FUSION_WEIGHTED;
  cfg.rerank = PLANRT_RERANK_NONE;
  cfg.guard = strcmp(env("RAG_GUARD", "quarantine"), "off") == 0 ? PLANRT_GUARD_OFF : PLANRT_GUARD_QUARANTINE;
  cfg.store = "index/docs";
  return planrt_retrieval_main(argc, argv, &cfg);
}
