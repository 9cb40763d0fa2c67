// Internal: a query's answer as JSON, as `query --json` prints it and `serve`'s
// POST /query returns it (docs/RETRIEVAL.md "Query output").
#ifndef PLANRT_RETRIEVAL_ANSWER_H
#define PLANRT_RETRIEVAL_ANSWER_H

#include "planrt_retrieval.h"

#include <nlohmann/json.hpp>

#include <string>

namespace planrt::rag {

const char *searchName(planrt_search_kind mode);
const char *fusionName(planrt_fusion fusion);
/// The inverses, for `query --mode/--fusion` and POST /query: false for another name.
bool searchKind(const std::string &name, planrt_search_kind &out);
bool fusionKind(const std::string &name, planrt_fusion &out);

/// The graph, the query, the mode, fusion and guard, and every hit with its
/// provenance, scores, text and (under guard = quarantine) flags.
nlohmann::ordered_json answerJson(const planrt_retrieval_config &cfg, const std::string &text,
                                  planrt_search_kind mode, planrt_fusion fusion, const planrt_hit *hits,
                                  size_t count);

} // namespace planrt::rag

#endif // PLANRT_RETRIEVAL_ANSWER_H
