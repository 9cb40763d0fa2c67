/* planrt_retrieval: the runtime of a `retrieval` graph (LANGUAGE.md "Retrieval
 * graphs and generation"): ingest a manifest-checked corpus into a checksummed
 * store (chunks, FAISS vectors, a Xapian BM25 index), query it (vector, keyword,
 * hybrid), and guard what it returns. A C ABI like planrt.h: a status on every
 * call, the message of the last failure in planrt_last_error(). The behaviour is
 * specified in docs/RETRIEVAL.md. */
#ifndef PLANRT_RETRIEVAL_H
#define PLANRT_RETRIEVAL_H

#include "planrt.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  PLANRT_CHUNK_TOKENS = 0,
  PLANRT_CHUNK_SENTENCES,
  PLANRT_CHUNK_PARAGRAPHS,
  PLANRT_CHUNK_SEMANTIC /* sentences, cut where the embedding similarity drops */
} planrt_chunk_kind;
typedef enum { PLANRT_EMBED_HASHING = 0, PLANRT_EMBED_MODEL, PLANRT_EMBED_FASTTEXT } planrt_embed_kind;
typedef enum { PLANRT_METRIC_IP = 0, PLANRT_METRIC_L2 } planrt_metric;
typedef enum { PLANRT_SEARCH_VECTOR = 0, PLANRT_SEARCH_KEYWORD, PLANRT_SEARCH_HYBRID } planrt_search_kind;
typedef enum { PLANRT_FUSION_WEIGHTED = 0, PLANRT_FUSION_RRF } planrt_fusion;
typedef enum { PLANRT_RERANK_NONE = 0, PLANRT_RERANK_MODEL } planrt_rerank_kind;
typedef enum { PLANRT_GUARD_QUARANTINE = 0, PLANRT_GUARD_OFF } planrt_guard_kind;

/* A retrieval declaration, as the generated main fills it. Relative paths and
 * patterns are resolved against base_dir (the plan's directory; NULL or "" = the
 * working directory). Strings are borrowed for the duration of each call. */
typedef struct {
  const char *graph;     /* the declaration's name, recorded in the store */
  const char *plan_file; /* where the declaration is, for messages (may be NULL) */
  int plan_line;
  const char *base_dir;

  const char *const *corpus; /* glob(3) patterns; `**` matches any number of directories */
  size_t corpus_count;
  const char *manifest;    /* sha256sum-format manifest, or NULL for none */
  uint64_t max_file_bytes; /* a larger corpus file is refused; 0 = 16 MiB */

  planrt_chunk_kind chunk;
  int64_t chunk_size;    /* tokens, sentences or paragraphs per chunk */
  int64_t chunk_overlap; /* units shared by consecutive chunks, < chunk_size */

  planrt_embed_kind embed;
  int64_t embed_dim;       /* hashing(dim); for model(...), the model's hidden size */
  const char *embed_model; /* model(NAME, checkpoint: ..., pool: ...): the model's name */
  const char *embed_checkpoint;

  const char *index_factory; /* any faiss::index_factory string, e.g. "IVF64,Flat" */
  planrt_metric metric;
  int64_t nprobe; /* IVF lists probed per query; 0 = FAISS's default */

  planrt_search_kind search;
  double vector_weight, keyword_weight; /* weighted fusion; need not sum to 1 */
  int64_t top;                          /* candidates taken from each side before fusion */
  planrt_fusion fusion;
  int64_t rrf_k; /* reciprocal-rank fusion's constant k; 0 = 60 */

  planrt_rerank_kind rerank;
  planrt_guard_kind guard;
  const char *store; /* the store directory */

  /* Model embedding and re-ranking (docs/RETRIEVAL.md "Models"). */
  const char *embed_pool;   /* "mean" (NULL) or "last" */
  const char *rerank_model; /* rerank = model(NAME, checkpoint: ..., top: N) */
  const char *rerank_checkpoint;
  int64_t rerank_top;                    /* results kept after re-ranking */
  const planrt_retrieval_models *models; /* the compiled entries (planrt.h) */

  /* HNSW indexes (faiss("HNSW32", ef_search: N, ef_construction: N)); 0 = FAISS's
   * defaults (16 and 40). ef_construction shapes the stored graph (part of the
   * store's fingerprint); ef_search is the candidate list of a query. */
  int64_t ef_search, ef_construction;

  /* chunk = semantic(size, threshold): cut between sentences whose neighbourhoods'
   * embeddings have a cosine below this (docs/RETRIEVAL.md "Ingest"). */
  double chunk_threshold;

  /* embed = fasttext(…): word and subword vectors trained on the corpus at ingest with
   * Debian's libfasttext (docs/RETRIEVAL.md "Embedding"). embed_dim is their size. */
  const char *fasttext_model; /* "skipgram" (NULL) or "cbow" */
  int64_t fasttext_epoch, fasttext_min_count, fasttext_minn, fasttext_maxn, fasttext_bucket, fasttext_threads;
} planrt_retrieval_config;

/* The executable's driver: `ingest`, `query TEXT [--k N] [--json] [--mode M]
 * [--fusion F]`, `verify`, `--help`. Returns the exit status: 0 done, 1 an error
 * (named on stderr), 2 a bad command line. */
int planrt_retrieval_main(int argc, char **argv, const planrt_retrieval_config *cfg);
/* planrt_retrieval_main_manifest (what a planc-built executable's main calls) and
 * planrt_retrieval_ground (grounded generation): planrt_abi.def (PLANRT_ABI_RETRIEVAL). */
#define PLANRT_ABI_RETRIEVAL(ret, name, params) ret name params;
#include "planrt_abi.def"

/* ---- Ingestion. */
typedef struct {
  uint64_t files, files_added, files_changed, files_unchanged, files_removed;
  uint64_t chunks, chunks_embedded, chunks_reused;
  uint64_t bytes_read; /* bytes of the files chunked in this run */
} planrt_ingest_report;

/* Reads, verifies, chunks and embeds the corpus, and replaces the store
 * atomically. Any refused file (not in the manifest, hash mismatch, binary, not
 * UTF-8, too large, unreadable) fails the whole ingest and leaves the store as it
 * was; the message lists every refused file. Files whose sha256 equals the one
 * the store recorded are not re-chunked or re-embedded. `progress` != 0 draws a
 * progress bar on stderr (the driver passes isatty(2)). */
planrt_status planrt_retrieval_ingest(const planrt_retrieval_config *cfg, int progress, planrt_ingest_report *report);

/* Checks the store against its manifest (every file's sha256, the graph name, the
 * configuration fingerprint) without handing any byte of it to FAISS or Xapian,
 * then loads it and checks that the three parts agree. */
planrt_status planrt_retrieval_verify(const planrt_retrieval_config *cfg);

/* ---- Queries. */
typedef struct planrt_retriever planrt_retriever;

/* Verifies the store as planrt_retrieval_verify does, then loads it. */
planrt_status planrt_retriever_open(const planrt_retrieval_config *cfg, planrt_retriever **out);
void planrt_retriever_close(planrt_retriever *r);

typedef struct {
  uint32_t begin, end; /* byte range in the chunk's text */
  const char *kind;    /* "role-marker", "override", ... (docs/RETRIEVAL.md) */
  double score;
} planrt_guard_flag;

typedef struct {
  int64_t chunk;                      /* chunk id in the store */
  double score;                       /* the fused score (the side's score for one side) */
  int vector_rank, keyword_rank;      /* 1-based rank on each side, 0 = not retrieved there */
  double vector_score, keyword_score; /* raw: inner product or −squared L2; BM25 */
  const char *file;                   /* provenance */
  uint64_t begin, end;                /* byte range in the file */
  const char *sha256;                 /* of the chunk's bytes, hex */
  const char *text;
  size_t text_len;
  const planrt_guard_flag *flags; /* instruction-like spans (guard = quarantine) */
  size_t flag_count;
  int fused_rank;      /* 1-based rank before re-ranking (rerank = model), else 0 */
  double rerank_score; /* the re-ranker's: mean log-probability of the query given the chunk */
} planrt_hit;

/* Runs a query; the hits stay valid until the next query or close. k = 0 takes
 * the plan's `top` (with rerank = model, its `top`). A model re-ranker re-scores
 * the first max(top, k) fused candidates and orders them by its score. */
planrt_status planrt_retriever_query(planrt_retriever *r, const char *text, int64_t k, planrt_search_kind mode,
                                     planrt_fusion fusion, const planrt_hit **hits, size_t *count);

/* ---- Guard. */
/* Scans text for instruction-like spans (the detector of docs/RETRIEVAL.md);
 * returns how many there are and writes up to `cap` of them. The kinds point to
 * static strings. */
size_t planrt_guard_scan(const char *text, size_t len, planrt_guard_flag *flags, size_t cap);

/* Builds a prompt with an instruction section (`instructions`, and the question)
 * and a data section holding every hit as quoted, delimited data with its
 * provenance; flagged spans are marked inside the data section and never copied
 * into the instruction section. Returns a malloc'd string (free() it), or NULL
 * with planrt_last_error() set. */
char *planrt_guard_prompt(const char *instructions, const char *question, const planrt_hit *hits, size_t count);

#ifdef __cplusplus
}
#endif

#endif /* PLANRT_RETRIEVAL_H */
