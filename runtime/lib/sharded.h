// Internal: sharded checkpoints (one safetensors file per data-parallel rank, an
// index with their hashes, committed by one directory rename) and their reading
// back into any layout.
#ifndef PLANRT_LIB_SHARDED_H
#define PLANRT_LIB_SHARDED_H

#include "status.h"

#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace planrt {

/// A parameter of the flat layout: name, offset and count (floats). Under tensor
/// parallelism a rank holds a piece of it: `shape` is the piece's, dim `splitDim` of the
/// whole tensor is cut in `parts` block by block (`blocks`: whole extents), and rank c
/// holds piece c of each block; splitDim is -1 for a whole parameter.
struct FlatParam {
  std::string name;
  int64_t offset = 0, count = 0;
  std::vector<int64_t> shape, blocks;
  int64_t splitDim = -1, parts = 1;
  /// Pipeline parallelism: a copy of a parameter that an earlier stage owns (a tied
  /// embedding); written, but read back from the owner's file.
  bool replica = false;
};

/// Where a rank lies in the mesh: its data-, tensor- and pipeline-parallel coordinates
/// and those axes' sizes.
struct MeshPlace {
  int64_t dataRank = 0, dataSize = 1, tensorRank = 0, tensorSize = 1, stage = 0, stages = 1;
  /// The rank's file: dataRank + dataSize × (tensorRank + tensorSize × stage).
  int64_t file() const { return dataRank + dataSize * (tensorRank + tensorSize * stage); }
  int64_t files() const { return dataSize * tensorSize * stages; }
};

/// f(local, whole, n) for each run of n contiguous elements that tensor rank c holds of
/// parameter p: at `local` in its piece, at `whole` in the whole tensor.
template <typename F> void forEachRun(const FlatParam &p, int64_t c, F f) {
  if (p.splitDim < 0)
    return f(int64_t(0), int64_t(0), p.count);
  size_t k = size_t(p.splitDim);
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < k; ++i)
    outer *= p.shape[i];
  for (size_t i = k + 1; i < p.shape.size(); ++i)
    inner *= p.shape[i];
  int64_t local = p.shape[k], whole = local * p.parts;
  for (int64_t o = 0; o < outer; ++o) {
    int64_t at = 0, begin = 0;
    for (int64_t block : p.blocks) {
      int64_t piece = block / p.parts;
      f((o * local + at) * inner, (o * whole + begin + c * piece) * inner, piece * inner);
      at += piece;
      begin += block;
    }
  }
}

/// A module buffer besides the flat state (batchnorm's running statistics): whole and
/// alike on every rank. Every file of a sharded checkpoint carries it; it is read back
/// from the index's first file. `data` is read when saving and written when loading.
struct ModelBuffer {
  std::string name;
  planrt_dtype dtype = PLANRT_F32;
  std::vector<int64_t> shape;
  void *data = nullptr;
  /// As a tensor to write (pointing into this buffer).
  planrt_tensor tensor() const { return {name.c_str(), dtype, int(shape.size()), shape.data(), data}; }
  /// Read from st by name, dtype and shape (a missing or different tensor is an error).
  planrt_status readFrom(const planrt_st *st) const {
    return planrt_st_read(st, name.c_str(), dtype, int(shape.size()), shape.data(), data);
  }
};

/// This rank's piece of the optimizer state: for each group g, the flat range
/// [begin[g], begin[g] + count[g]) of the parameters and both moments.
struct StatePiece {
  int64_t begin[2] = {0, 0}, count[2] = {0, 0};
  const float *params[2] = {nullptr, nullptr}, *expAvg[2] = {nullptr, nullptr}, *expAvgSq[2] = {nullptr, nullptr};
};

/// Writes DIR/step-NNNNNNNN/ (rank-RRRRR.safetensors per data, tensor and pipeline rank,
/// RRRRR = place.file(), index.json with each file's sha256): every
/// rank writes its piece of its flat layout (`layout`, with the tensor split of each
/// parameter) into a `.partial` directory, then rank 0 hashes the files, writes the index
/// and renames the directory, so a crash at any point leaves the previous checkpoint the
/// newest complete one. Keeps the newest `keep` checkpoints (0: all). Collective.
planrt_status shardedSave(planrt_mesh *mesh, const std::string &dir, uint64_t step, int keep, const MeshPlace &place,
                          const StatePiece &piece, const std::vector<FlatParam> &layout,
                          const std::vector<std::string> &metadata, const std::vector<ModelBuffer> &buffers = {});

/// Every complete checkpoint in dir by ascending step: (step, path, sharded) for
/// single files (step-N.safetensors) and sharded directories (step-N/ with index.json).
std::vector<std::tuple<uint64_t, std::string, bool>> listCheckpoints(const std::string &dir);

/// The newest complete checkpoint in dir: a single file (step-N.safetensors) or a
/// sharded directory (step-N/ with index.json).
planrt_status latestCheckpoint(const std::string &dir, std::string &path, uint64_t &step, bool &sharded);

/// Reads a sharded checkpoint into flat buffers P, M and V of whole parameters laid out as
/// `layout` (any data- and tensor-parallel sizes: parameters are matched by name, tensor
/// pieces put back in place), after checking every file against the index's sha256.
/// `metadata` gets rank 0's. Parameters named in `elsewhere` (the other pipeline stages')
/// are skipped; any other parameter the layout lacks is an error. `buffers` are read by
/// name, dtype and shape (a missing one is an error).
planrt_status shardedLoad(const std::string &path, const std::vector<FlatParam> &layout, float *P, float *M, float *V,
                          std::map<std::string, std::string> &metadata, const std::vector<std::string> &elsewhere = {},
                          const std::vector<ModelBuffer> &buffers = {});

/// The sha256 of a file, as 64 hex digits.
planrt_status sha256File(const std::string &path, std::string &hex);
/// The sha256 of a string, as 64 hex digits.
std::string sha256Text(const std::string &text);

} // namespace planrt

#endif // PLANRT_LIB_SHARDED_H
