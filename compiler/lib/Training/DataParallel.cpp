// Flat buffer layout, data-parallel sharding and the step's collectives
// (DataParallel.h).
#include "plan/Training/DataParallel.h"

namespace plan::training {

FlatLayout flatLayout(const std::vector<int64_t> &counts, const std::vector<bool> &decayed, int64_t shards) {
  FlatLayout l;
  l.shards = shards < 1 ? 1 : shards;
  l.offset.assign(counts.size(), 0);
  auto align = [](int64_t x, int64_t to) { return (x + to - 1) / to * to; };
  int64_t at = 0;
  for (int g = 0; g < 2; ++g) {
    l.groupBegin[g] = at;
    for (size_t i = 0; i < counts.size(); ++i)
      if (decayed[i] == (g == 0)) {
        l.offset[i] = at;
        at = align(at + counts[i], 16);
      }
    at = l.groupBegin[g] + align(at - l.groupBegin[g], 16 * l.shards);
    l.groupEnd[g] = at;
  }
  l.total = at;
  return l;
}

std::vector<std::vector<size_t>> gradientBuckets(const std::vector<int64_t> &floats, int64_t bucketBytes) {
  std::vector<std::vector<size_t>> out;
  int64_t bytes = 0;
  for (size_t i = 0; i < floats.size(); ++i) {
    if (out.empty() || bytes >= bucketBytes) {
      out.emplace_back();
      bytes = 0;
    }
    out.back().push_back(i);
    bytes += floats[i] * 4;
  }
  return out;
}

const char *collectiveName(Collective c) {
  switch (c) {
  case Collective::AllReduce:
    return "all_reduce";
  case Collective::AllGather:
    return "all_gather";
  case Collective::ReduceScatter:
    return "reduce_scatter";
  }
  return "?";
}

uint64_t ringBytes(Collective c, int64_t n, uint64_t fullBytes) {
  if (n <= 1)
    return 0;
  uint64_t k = uint64_t(n);
  return c == Collective::AllReduce ? 2 * (k - 1) * fullBytes / k : (k - 1) * fullBytes / k;
}

std::vector<DataCollective> dataCollectives(int64_t zero, int64_t d, int64_t micro, const FlatLayout &l,
                                            bool oneGather, bool pipelined) {
  std::vector<DataCollective> out;
  if (d <= 1)
    return out;
  micro = zeroCollectivesPerStep(micro, pipelined);
  int64_t groups = (l.groupFloats(0) > 0) + (l.groupFloats(1) > 0);
  int64_t n = l.total;
  switch (zero) {
  case 0:
    out.push_back({Collective::AllReduce, "gradients", n, 1, 1});
    break;
  case 1:
  case 2:
    out.push_back({Collective::ReduceScatter, "gradients", n, zero == 2 ? micro : 1, groups});
    out.push_back({Collective::AllGather, "updated parameters", n, 1, groups});
    break;
  default:
    if (oneGather) {
      out.push_back({Collective::AllGather, "parameters", n, micro, groups});
    } else {
      out.push_back({Collective::AllGather, "parameters (forward)", n, micro, groups});
      out.push_back({Collective::AllGather, "parameters (backward)", n, micro, groups});
    }
    out.push_back({Collective::ReduceScatter, "gradients", n, micro, groups});
  }
  out.push_back({Collective::AllReduce, "loss", 1, 1, 1});
  if (zero >= 1)
    out.push_back({Collective::AllReduce, "gradient norm", 1, 1, 1});
  return out;
}

} // namespace plan::training
