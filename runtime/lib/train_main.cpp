// The training driver behind every training executable: planrt_train_main reads
// the command line and the manifest, checks everything it will need (data, files,
// directories) before the first step, initialises or loads the parameters, then
// runs step s = data → grad × accumulation → update, with the log, evaluation,
// checkpoints and the progress line. docs/EXECUTABLES.md is its specification.
#include "step_context.h"
#include "manifest_json.h"
#include "sharded.h"
#include "status.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <map>
#include <malloc.h>
#include <memory>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using planrt::fail;
using json = nlohmann::json;
using namespace planrt::manifest;

namespace {

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;
/// Bounds that keep s × batch, offsets and counts far from overflow.
constexpr int64_t kMaxSteps = int64_t(1) << 40;
constexpr int64_t kMaxFloats = int64_t(1) << 40;
constexpr int64_t kMaxDim = int64_t(1) << 31;

// ---- The manifest.

struct Param {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0, count = 0;
  std::string init;  ///< "normal", "zeros" or "ones"
  double std = 0;
  /// Tensor parallelism: dim `splitDim` of the full tensor is cut into `parts`, block
  /// by block (`blocks`: full extents, q/k/v of a packed projection), and this rank
  /// holds piece c of each block; -1 when the parameter is whole on every rank.
  int64_t splitDim = -1, parts = 1;
  std::vector<int64_t> blocks;
  /// The whole tensor: its shape, and where it lies in a buffer of whole parameters
  /// (checkpoints, --init, --export are whole). Without tensor parallelism, the same as
  /// shape and offset.
  std::vector<int64_t> fullShape;
  int64_t fullOffset = 0, fullCount = 0;
  /// Pipeline parallelism: the parameter's position in the whole model (its random
  /// stream), and whether it is a copy of one an earlier stage owns (a tied embedding).
  int64_t index = -1;
  bool replica = false;
};

/// A buffer of the step program's table.
struct BufferSpec {
  std::string name, lifetime;
  int64_t floats = 0;
  int64_t stage = -1;  ///< pipeline parallelism: the stage whose ranks hold it, or -1 (all)
  int64_t offset = -1; ///< its bytes' offset in the executable's arena, or -1 without one
};

struct Manifest {
  std::string plan, model;
  int64_t numFloats = 0;
  std::vector<Param> params;
  int64_t groupBegin[2] = {0, 0}, groupEnd[2] = {0, 0};
  std::vector<std::string> axes;
  std::vector<int64_t> sizes;
  unsigned dataMask = 0;
  int64_t zero = 0;
  std::vector<BufferSpec> buffers;
  std::string master;     ///< the buffer holding the f32 parameters the update writes
  bool sharded = false;   ///< master and moments hold this rank's pieces only
  int64_t batch = 0, micro = 0, seq = 0, accumulation = 0, dataParallel = 0, steps = 0, vocab = 0;
  int64_t tensorParallel = 1;
  int tensorAxis = -1;     ///< the mesh axis of tensor parallelism, or -1
  int64_t fullFloats = 0;  ///< floats of the whole parameters (Param::fullOffset)
  /// Pipeline parallelism: the stages (1 without), the axis, this rank's stage (whose
  /// parameters `params` lists), and every stage's parameter table.
  int64_t pipeline = 1, stage = 0;
  int pipelineAxis = -1;
  std::vector<std::vector<Param>> stageParams;
  std::vector<int64_t> stageFullFloats;  ///< each stage's floats of whole parameters
  int64_t activationIn = 0, activationOut = 0;  ///< floats received from and sent to the neighbours
  /// A buffer of the step program by its name in the schedule: under a pipeline, the
  /// one of this rank's stage.
  std::string bufferName(const std::string &name) const {
    return pipeline > 1 ? name + "_s" + std::to_string(stage) : name;
  }
  uint64_t seed = 0;
  std::vector<std::string> data, val;
  int64_t evalEvery = 0, evalBatches = 0;
  std::string checkpointDir;
  int64_t checkpointEvery = 0, checkpointKeep = 0;
  std::string lossScaleKind = "none";  ///< "none", "dynamic" or "static" (fp16)
  double lossScaleInit = 1;
  /// The executable's arena (the cuda targets' memory plan): the step program's buffers
  /// at their offsets in its first stateBytes, then stepBytes of step region.
  bool arena = false;
  int64_t stateBytes = 0, stepBytes = 0;
  int64_t rankStateBytes = 0, rankStepBytes = 0;  ///< what this rank's pipeline stage needs of them
};

/// Parses and checks the manifest; PLANRT_ERR_FORMAT naming the field if malformed.
planrt_status parseManifest(const char *source, Manifest &m, int64_t stage = 0) {
  if (!source)
    return fail(PLANRT_ERR_FORMAT, "the executable has no manifest");
  return planrt::manifest::parse([&] {
    json root;
    try {
      root = json::parse(source);
    } catch (const json::exception &e) {
      throw Malformed{std::string("not valid JSON: ") + e.what()};
    }
    std::string format = text(root, "format", "the manifest");
    if (format != "planc-train-1")
      throw Malformed{"format '" + format + "'; this runtime reads planc-train-1"};
    m.plan = text(root, "plan", "the manifest");
    m.model = text(root, "model", "the manifest");
    // Pipeline parallelism: each stage has its own parameters and flat layout, and this
    // rank reads its stage's; without, the top level holds the one layout.
    const json *layoutOf = &root;
    std::string in = "";
    if (root.contains("pipeline")) {
      const json &pipe = root["pipeline"];
      const json &stages = field(root, "stages", "the manifest");
      if (!stages.is_array() || stages.size() < 2)
        throw Malformed{"stages is not an array of two stages or more"};
      m.pipeline = int64_t(stages.size());
      std::string axis = text(pipe, "axis", "pipeline");
      m.stage = stage;
      if (stage < 0 || stage >= m.pipeline)
        throw Malformed{"pipeline stage " + std::to_string(stage) + " is not one of the stages"};
      const json &axes = field(field(root, "mesh", "the manifest"), "axes", "mesh");
      for (size_t a = 0; a < axes.size(); ++a)
        if (axes[a].is_string() && axes[a].get<std::string>() == axis)
          m.pipelineAxis = int(a);
      if (m.pipelineAxis < 0)
        throw Malformed{"pipeline.axis names '" + axis + "', which is not an axis"};
      layoutOf = &stages[size_t(stage)];
      auto stageName = [](int64_t k) { return "stages[" + std::to_string(k) + "]"; };
      if (stage > 0)
        m.activationIn = integer(stages[size_t(stage - 1)], "activation", stageName(stage - 1), 1, kMaxFloats);
      if (stage + 1 < m.pipeline)
        m.activationOut = integer(stages[size_t(stage)], "activation", stageName(stage), 1, kMaxFloats);
      in = stageName(stage) + ".";
    }
    const json &lay = *layoutOf;
    m.numFloats = integer(lay, "num_floats", "the manifest", 1, kMaxFloats);

    const json &params = field(lay, "params", "the manifest");
    if (!params.is_array() || params.empty())
      throw Malformed{in + "params is not a non-empty array"};
    for (size_t i = 0; i < params.size(); ++i) {
      std::string where = in + "params[" + std::to_string(i) + "]";
      const json &pj = params[i];
      Param p;
      p.name = text(pj, "name", where);
      if (p.name.empty())
        throw Malformed{where + ".name is empty"};
      where += " ('" + p.name + "')";
      const json &shape = field(pj, "shape", where);
      if (!shape.is_array())
        throw Malformed{where + ".shape is not an array"};
      int64_t elements = 1;
      for (const json &d : shape) {
        if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() > kMaxDim)
          throw Malformed{where + ".shape holds " + d.dump() + ", not a dimension"};
        p.shape.push_back(d.get<int64_t>());
        if (__builtin_mul_overflow(elements, d.get<int64_t>(), &elements) || elements > kMaxFloats)
          throw Malformed{where + ".shape is too large"};
      }
      p.offset = integer(pj, "offset", where, 0, kMaxFloats);
      p.count = integer(pj, "count", where, 0, kMaxFloats);
      if (p.count != elements)
        throw Malformed{where + ".count is " + std::to_string(p.count) + " but its shape has " +
                        std::to_string(elements) + " elements"};
      if (p.offset + p.count > m.numFloats)
        throw Malformed{where + " ends at float " + std::to_string(p.offset + p.count) + ", past num_floats " +
                        std::to_string(m.numFloats)};
      p.init = text(pj, "init", where);
      if (p.init == "normal") {
        const json &s = field(pj, "std", where);
        if (!s.is_number() || !(s.get<double>() >= 0) || !std::isfinite(s.get<double>()))
          throw Malformed{where + ".std is " + s.dump() + ", not a finite number ≥ 0"};
        p.std = s.get<double>();
      } else if (p.init != "zeros" && p.init != "ones") {
        throw Malformed{where + ".init is '" + p.init + "'; expected normal, zeros or ones"};
      }
      for (const Param &q : m.params)
        if (q.name == p.name)
          throw Malformed{"two parameters are named '" + p.name + "'"};
      p.fullShape = p.shape;
      if (pj.contains("split")) {
        const json &sp = pj["split"];
        p.splitDim = integer(sp, "dim", where + ".split", 0, int64_t(p.shape.size()) - 1);
        p.parts = integer(sp, "parts", where + ".split", 2, 65536);
        const json &blocks = field(sp, "blocks", where + ".split");
        int64_t total = 0;
        if (!blocks.is_array() || blocks.empty())
          throw Malformed{where + ".split.blocks is not a non-empty array"};
        for (const json &n : blocks) {
          if (!n.is_number_integer() || n.get<int64_t>() < 1 || n.get<int64_t>() % p.parts != 0)
            throw Malformed{where + ".split.blocks holds " + n.dump() + ", not an extent divisible by the parts"};
          p.blocks.push_back(n.get<int64_t>());
          total += n.get<int64_t>();
        }
        if (total != p.shape[size_t(p.splitDim)] * p.parts)
          throw Malformed{where + ".split.blocks do not add up to the split dim times the parts"};
        p.fullShape[size_t(p.splitDim)] = total;
      }
      p.fullCount = p.splitDim < 0 ? p.count : p.count / p.shape[size_t(p.splitDim)] * p.fullShape[size_t(p.splitDim)];
      if (pj.contains("index"))
        p.index = integer(pj, "index", where, 0, kMaxDim);
      if (pj.contains("replica")) {
        if (!pj["replica"].is_boolean())
          throw Malformed{where + ".replica is not true or false"};
        p.replica = pj["replica"].get<bool>();
      }
      m.params.push_back(std::move(p));
    }
    // The parameters must not overlap in the flat buffers.
    std::vector<const Param *> order;
    for (const Param &p : m.params)
      order.push_back(&p);
    std::sort(order.begin(), order.end(), [](auto *a, auto *b) { return a->offset < b->offset; });
    for (size_t i = 1; i < order.size(); ++i)
      if (order[i - 1]->offset + order[i - 1]->count > order[i]->offset)
        throw Malformed{"parameters '" + order[i - 1]->name + "' and '" + order[i]->name + "' overlap"};

    const json &train = field(root, "train", "the manifest");
    m.batch = integer(train, "batch", "train", 1, kMaxDim);
    m.micro = integer(train, "micro", "train", 1, kMaxDim);
    m.seq = integer(train, "seq", "train", 1, kMaxDim);
    m.accumulation = integer(train, "accumulation", "train", 1, kMaxDim);
    m.dataParallel = integer(train, "data_parallel", "train", 1, kMaxDim);
    m.tensorParallel = train.contains("tensor_parallel") ? integer(train, "tensor_parallel", "train", 1, kMaxDim) : 1;
    m.steps = integer(train, "steps", "train", 0, kMaxSteps);
    m.seed = uint64_t(integer(train, "seed", "train", 0, std::numeric_limits<int64_t>::max()));
    m.vocab = integer(train, "vocab", "train", 1, kMaxDim);
    if (m.batch != m.micro * m.accumulation * m.dataParallel)
      throw Malformed{"train.batch " + std::to_string(m.batch) + " is not micro × accumulation × data_parallel = " +
                      std::to_string(m.micro * m.accumulation * m.dataParallel)};
    m.zero = train.contains("zero") ? integer(train, "zero", "train", 0, 3) : 0;
    const json &groups = field(lay, "groups", "the manifest");
    if (!groups.is_array() || groups.size() != 2)
      throw Malformed{"groups is not an array of two [begin, end] spans"};
    for (int g = 0; g < 2; ++g) {
      std::string where = "groups[" + std::to_string(g) + "]";
      if (!groups[g].is_array() || groups[g].size() != 2 || !groups[g][0].is_number_integer() ||
          !groups[g][1].is_number_integer())
        throw Malformed{where + " is not a [begin, end] span"};
      m.groupBegin[g] = groups[g][0].get<int64_t>();
      m.groupEnd[g] = groups[g][1].get<int64_t>();
      if (m.groupBegin[g] < 0 || m.groupEnd[g] < m.groupBegin[g] || m.groupEnd[g] > m.numFloats ||
          (m.groupEnd[g] - m.groupBegin[g]) % m.dataParallel != 0)
        throw Malformed{where + " is not a span of num_floats that splits into data_parallel pieces"};
    }
    const json &mesh = field(root, "mesh", "the manifest");
    m.axes = texts(mesh, "axes", "mesh");
    const json &sizes = field(mesh, "sizes", "mesh");
    if (!sizes.is_array() || sizes.size() != m.axes.size() || m.axes.empty() || m.axes.size() > 16)
      throw Malformed{"mesh.sizes does not give one size per axis"};
    int64_t devices = 1, data = 1;
    for (const json &n : sizes) {
      if (!n.is_number_integer() || n.get<int64_t>() < 1 || n.get<int64_t>() > 65536)
        throw Malformed{"mesh.sizes holds " + n.dump() + ", not an axis size"};
      m.sizes.push_back(n.get<int64_t>());
      devices *= m.sizes.back();
    }
    for (const std::string &a : texts(mesh, "data", "mesh")) {
      auto it = std::find(m.axes.begin(), m.axes.end(), a);
      if (it == m.axes.end())
        throw Malformed{"mesh.data names '" + a + "', which is not an axis"};
      m.dataMask |= 1u << unsigned(it - m.axes.begin());
      data *= m.sizes[size_t(it - m.axes.begin())];
    }
    std::string tensor = mesh.contains("tensor") ? text(mesh, "tensor", "mesh") : "";
    if (!tensor.empty()) {
      auto it = std::find(m.axes.begin(), m.axes.end(), tensor);
      if (it == m.axes.end())
        throw Malformed{"mesh.tensor names '" + tensor + "', which is not an axis"};
      m.tensorAxis = int(it - m.axes.begin());
    }
    if (m.tensorParallel != (m.tensorAxis < 0 ? 1 : m.sizes[size_t(m.tensorAxis)]))
      throw Malformed{"train.tensor_parallel " + std::to_string(m.tensorParallel) + " is not the size of the tensor axis"};
    if (m.pipelineAxis >= 0 && m.sizes[size_t(m.pipelineAxis)] != m.pipeline)
      throw Malformed{"the manifest has " + std::to_string(m.pipeline) + " stages for a pipeline axis of " +
                      std::to_string(m.sizes[size_t(m.pipelineAxis)])};
    if (data != m.dataParallel || devices != m.dataParallel * m.tensorParallel * m.pipeline)
      throw Malformed{"train.data_parallel " + std::to_string(m.dataParallel) + " × tensor_parallel " +
                      std::to_string(m.tensorParallel) + " × pipeline stages " + std::to_string(m.pipeline) +
                      " is not the mesh's " + std::to_string(devices) + " devices over its data, tensor and pipeline axes"};
    // Whole parameters lie one after another (tensor parallelism; else as the flat layout).
    int64_t at = 0;
    for (Param &p : m.params) {
      if (p.splitDim >= 0 && p.parts != m.tensorParallel)
        throw Malformed{"parameter '" + p.name + "' is split in " + std::to_string(p.parts) +
                        " parts over a tensor axis of " + std::to_string(m.tensorParallel)};
      p.fullOffset = m.tensorParallel > 1 ? at : p.offset;
      at += p.fullCount;
    }
    m.fullFloats = m.tensorParallel > 1 ? at : m.numFloats;
    const json &schedule = field(root, "schedule", "the manifest");
    const json &buffers = field(schedule, "buffers", "schedule");
    if (!buffers.is_array() || buffers.empty())
      throw Malformed{"schedule.buffers is not a non-empty array"};
    for (size_t i = 0; i < buffers.size(); ++i) {
      std::string where = "schedule.buffers[" + std::to_string(i) + "]";
      BufferSpec b{text(buffers[i], "name", where), text(buffers[i], "lifetime", where),
                   integer(buffers[i], "floats", where, 0, kMaxFloats),
                   buffers[i].contains("stage") ? integer(buffers[i], "stage", where, 0, m.pipeline - 1) : -1};
      if (b.lifetime != "persistent" && b.lifetime != "step" && b.lifetime != "transient")
        throw Malformed{where + ".lifetime is '" + b.lifetime + "'"};
      m.buffers.push_back(b);
    }
    m.master = m.bufferName(text(schedule, "master", "schedule"));
    const json &sharded = field(schedule, "sharded", "schedule");
    if (!sharded.is_boolean())
      throw Malformed{"schedule.sharded is " + sharded.dump() + ", not true or false"};
    m.sharded = sharded.get<bool>();
    auto floatsOf = [&](const std::string &name) -> int64_t {
      for (const BufferSpec &b : m.buffers)
        if (b.name == name)
          return b.floats;
      throw Malformed{"schedule.buffers lacks '" + name + "'"};
    };
    if (m.groupEnd[0] > m.groupBegin[1])
      throw Malformed{"groups[0] and groups[1] overlap or are out of order"};
    if (m.sharded && m.dataParallel < 2)
      throw Malformed{"schedule.sharded needs more than one data-parallel rank"};
    for (const std::string &name : {m.bufferName("exp_avg"), m.bufferName("exp_avg_sq"), std::string("state")})
      for (const BufferSpec &b : m.buffers)
        if ((b.name == name || b.name == m.master) && b.lifetime != "persistent")
          throw Malformed{"schedule buffer '" + b.name + "' must be persistent"};
    int64_t piece = m.sharded ? (m.groupEnd[0] - m.groupBegin[0] + m.groupEnd[1] - m.groupBegin[1]) / m.dataParallel
                              : m.numFloats;
    if (floatsOf(m.bufferName("params")) != m.numFloats || floatsOf(m.bufferName("grads")) != m.numFloats ||
        floatsOf("state") != 8 || floatsOf(m.master) != piece || floatsOf(m.bufferName("exp_avg")) != piece ||
        floatsOf(m.bufferName("exp_avg_sq")) != piece)
      throw Malformed{"schedule.buffers do not have the sizes of the flat layout"};
    m.data = texts(train, "data", "train");
    m.val = train.contains("val") ? texts(train, "val", "train") : std::vector<std::string>{};
    m.evalEvery = train.contains("eval_every") ? integer(train, "eval_every", "train", 0, kMaxSteps) : 0;
    m.evalBatches = train.contains("eval_batches") ? integer(train, "eval_batches", "train", 0, kMaxDim) : 0;
    if (train.contains("checkpoint")) {
      const json &c = train["checkpoint"];
      m.checkpointDir = text(c, "dir", "train.checkpoint");
      m.checkpointEvery = integer(c, "every", "train.checkpoint", 0, kMaxSteps);
      m.checkpointKeep = integer(c, "keep", "train.checkpoint", 0, std::numeric_limits<int>::max());
    }
    if (train.contains("loss_scale")) {
      const json &l = train["loss_scale"];
      m.lossScaleKind = text(l, "kind", "train.loss_scale");
      if (m.lossScaleKind != "none" && m.lossScaleKind != "dynamic" && m.lossScaleKind != "static")
        throw Malformed{"train.loss_scale.kind is '" + m.lossScaleKind + "'; expected none, dynamic or static"};
      const json &init = field(l, "init", "train.loss_scale");
      if (!init.is_number() || !(init.get<double>() > 0) || !std::isfinite(init.get<double>()))
        throw Malformed{"train.loss_scale.init must be a positive number"};
      m.lossScaleInit = init.get<double>();
    }
    if (root.contains("memory")) {
      const json &mem = root["memory"];
      constexpr int64_t kMaxBytes = kMaxFloats * 4;
      m.arena = true;
      m.stateBytes = integer(mem, "state_bytes", "memory", 0, kMaxBytes);
      m.stepBytes = integer(mem, "step_bytes", "memory", 0, kMaxBytes);
      // Under a pipeline, this rank's stage may need less than the largest stage.
      auto ofStage = [&](const char *key, int64_t all) {
        if (!mem.contains(key))
          return all;
        const json &st = mem[key];
        if (!st.is_array() || int64_t(st.size()) != m.pipeline || !st[size_t(m.stage)].is_number_integer() ||
            st[size_t(m.stage)].get<int64_t>() < 0 || st[size_t(m.stage)].get<int64_t>() > all)
          throw Malformed{std::string("memory.") + key + " is not one size per pipeline stage, each at most " +
                          std::to_string(all)};
        return st[size_t(m.stage)].get<int64_t>();
      };
      m.rankStateBytes = ofStage("stage_state_bytes", m.stateBytes);
      m.rankStepBytes = ofStage("stage_step_bytes", m.stepBytes);
      for (size_t i = 0; i < m.buffers.size(); ++i) {
        BufferSpec &b = m.buffers[i];
        std::string where = "schedule.buffers[" + std::to_string(i) + "]";
        b.offset = integer(buffers[i], "offset", where, 0, m.stateBytes);
        int64_t limit = b.stage < 0 || b.stage == m.stage ? m.rankStateBytes : m.stateBytes;
        if (b.offset % 256 || b.offset + b.floats * 4 > limit)
          throw Malformed{where + ".offset " + std::to_string(b.offset) + " does not place its " +
                          std::to_string(b.floats) + " floats at a 256-byte boundary inside the " +
                          std::to_string(limit) + " bytes of the arena's state part"};
      }
    }
  });
}

// ---- The command line.

struct Options {
  std::optional<int64_t> steps, checkpointEvery;
  std::string log, init, saveInit, resume, checkpointDir, saveGrads, exportFile;
  double commTimeout = 300;
  std::vector<std::string> data, val;
  bool quiet = false, help = false;
};

const char kUsage[] =
    "usage: %s [options]\n"
    "Trains plan '%s' (model '%s'); docs/EXECUTABLES.md describes the run.\n"
    "\n"
    "  --steps N              run until step N (the plan's steps by default); the\n"
    "                         learning-rate schedule stays the plan's\n"
    "  --data PATTERN         training token files (repeatable; replaces the plan's)\n"
    "  --val PATTERN          validation token files (repeatable; replaces the plan's)\n"
    "  --log FILE             append one JSON line per step (and per evaluation) to FILE\n"
    "  --init FILE            load the parameters from a safetensors file, by name\n"
    "  --save-init FILE       write the parameters to FILE before the first step\n"
    "  --resume DIR           continue from the newest checkpoint in DIR\n"
    "  --checkpoint-dir DIR   write checkpoints to DIR (replaces the plan's)\n"
    "  --checkpoint-every N   a checkpoint every N steps (replaces the plan's; 0: none)\n"
    "  --save-grads FILE      write the accumulated gradient of the first step to FILE\n"
    "  --export FILE          at the end, write one consolidated checkpoint (parameters\n"
    "                         and optimizer state, Hugging Face names) to FILE\n"
    "  --comm-timeout SECONDS a collective that waits longer stops every rank, naming\n"
    "                         it (default 300)\n"
    "  --quiet                no progress or evaluation lines; errors and the final\n"
    "                         line only\n"
    "  --help                 this text\n"
    "\n"
    "Exit status: 0 done, 1 an error (named on stderr), 2 a bad command line.\n";

enum class Arg {
  Steps, Data, Val, Log, Init, SaveInit, Resume, CheckpointDir, CheckpointEvery, SaveGrads, Export, CommTimeout, Quiet,
  Help
};

struct Flag {
  const char *name;
  Arg arg;
  bool value;
};
const Flag kFlags[] = {{"--steps", Arg::Steps, true},
                       {"--data", Arg::Data, true},
                       {"--val", Arg::Val, true},
                       {"--log", Arg::Log, true},
                       {"--init", Arg::Init, true},
                       {"--save-init", Arg::SaveInit, true},
                       {"--resume", Arg::Resume, true},
                       {"--checkpoint-dir", Arg::CheckpointDir, true},
                       {"--checkpoint-every", Arg::CheckpointEvery, true},
                       {"--save-grads", Arg::SaveGrads, true},
                       {"--export", Arg::Export, true},
                       {"--comm-timeout", Arg::CommTimeout, true},
                       {"--quiet", Arg::Quiet, false},
                       {"--help", Arg::Help, false},
                       {"-h", Arg::Help, false}};

int usageError(const std::string &message) {
  std::fprintf(stderr, "planrt: error: %s (see --help)\n", message.c_str());
  return kExitUsage;
}

/// A whole decimal number in [0, kMaxSteps], or nothing.
std::optional<int64_t> count(const std::string &s) {
  if (s.empty() || s.size() > 15 || s.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  int64_t v = std::stoll(s);
  if (v > kMaxSteps)
    return std::nullopt;
  return v;
}

/// Fills `o`; returns 0, or the exit status after printing the error.
int parseOptions(int argc, char **argv, Options &o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i] ? argv[i] : "";
    std::string name = a, value;
    bool inlineValue = false;
    if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
      name = a.substr(0, a.find('='));
      value = a.substr(a.find('=') + 1);
      inlineValue = true;
    }
    const Flag *flag = nullptr;
    for (const Flag &f : kFlags)
      if (name == f.name)
        flag = &f;
    if (!flag) {
      if (a.empty() || a[0] != '-')
        return usageError("unexpected argument '" + a + "'");
      return usageError("unknown option '" + name + "'");
    }
    if (flag->value && !inlineValue) {
      if (i + 1 >= argc)
        return usageError("option '" + name + "' needs a value");
      value = argv[++i];
    } else if (!flag->value && inlineValue) {
      return usageError("option '" + name + "' takes no value");
    }
    if (flag->value && value.empty())
      return usageError("option '" + name + "' needs a non-empty value");
    switch (flag->arg) {
    case Arg::Steps:
    case Arg::CheckpointEvery: {
      std::optional<int64_t> n = count(value);
      if (!n)
        return usageError("bad value '" + value + "' for " + name + ": expected a whole number ≥ 0");
      (flag->arg == Arg::Steps ? o.steps : o.checkpointEvery) = n;
      break;
    }
    case Arg::Data: o.data.push_back(value); break;
    case Arg::Val: o.val.push_back(value); break;
    case Arg::Log: o.log = value; break;
    case Arg::Init: o.init = value; break;
    case Arg::SaveInit: o.saveInit = value; break;
    case Arg::Resume: o.resume = value; break;
    case Arg::CheckpointDir: o.checkpointDir = value; break;
    case Arg::SaveGrads: o.saveGrads = value; break;
    case Arg::Export: o.exportFile = value; break;
    case Arg::CommTimeout: {
      std::optional<int64_t> n = count(value);
      if (!n || *n < 1)
        return usageError("bad value '" + value + "' for " + name + ": expected whole seconds ≥ 1");
      o.commTimeout = double(*n);
      break;
    }
    case Arg::Quiet: o.quiet = true; break;
    case Arg::Help: o.help = true; break;
    }
  }
  if (!o.init.empty() && !o.resume.empty())
    return usageError("--init and --resume cannot be combined: a checkpoint holds the parameters");
  return 0;
}

// ---- Files and directories.

/// Creates dir and its parents if missing, then proves it writable by creating and
/// removing a file in it: an unusable checkpoint directory fails before step 0.
planrt_status prepareDirectory(const std::string &dir, const char *what) {
  for (size_t i = 1; i <= dir.size(); ++i)
    if (i == dir.size() || dir[i] == '/') {
      std::string prefix = dir.substr(0, i);
      if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
        return fail(PLANRT_ERR_IO, "%s: cannot create the %s: %s", dir.c_str(), what, std::strerror(errno));
    }
  return PLANRT_OK;
}

planrt_status probeWritable(const std::string &dir, const char *what) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0)
    return fail(PLANRT_ERR_IO, "%s: the %s does not exist: %s", dir.c_str(), what, std::strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return fail(PLANRT_ERR_IO, "%s: the %s is not a directory", dir.c_str(), what);
  char host[64] = "";
  ::gethostname(host, sizeof host - 1);
  std::string probe = dir + "/.planrt-probe." + host + "." + std::to_string(getpid());
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return fail(PLANRT_ERR_IO, "%s: the %s is not writable: %s", dir.c_str(), what, std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
  return PLANRT_OK;
}

std::string parentOf(const std::string &file) {
  size_t slash = file.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : file.substr(0, slash);
}

// ---- Terminal output.

std::string rate(double tokensPerS) {
  char buf[32];
  if (!(tokensPerS >= 0) || !std::isfinite(tokensPerS))
    return "-";
  if (tokensPerS < 1e3)
    std::snprintf(buf, sizeof buf, "%.0f", tokensPerS);
  else if (tokensPerS < 1e6)
    std::snprintf(buf, sizeof buf, "%.1fk", tokensPerS / 1e3);
  else if (tokensPerS < 1e9)
    std::snprintf(buf, sizeof buf, "%.2fM", tokensPerS / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.2fG", tokensPerS / 1e9);
  return buf;
}

std::string duration(double seconds) {
  char buf[32];
  long s = std::isfinite(seconds) && seconds > 0 ? long(seconds + 0.5) : 0;
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%lds", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  return buf;
}

/// The progress line on stderr: redrawn in place on a terminal, one plain line every
/// `every` steps (and at the last) otherwise.
class Progress {
public:
  /// `silent`: another rank reports (only errors are printed).
  Progress(bool quiet, int64_t end, bool silent = false)
      : quiet(quiet || silent), silent(silent), tty(::isatty(STDERR_FILENO)), end(end) {
    every = std::max<int64_t>(1, end / 20);
  }

  void step(int64_t done, double loss, double tokensPerS, double eta) {
    if (quiet)
      return;
    auto now = std::chrono::steady_clock::now();
    bool last = done == end;
    if (tty) {
      if (!last && drawn && now - lastDraw < std::chrono::milliseconds(100))
        return;
    } else if (done % every != 0 && !last) {
      return;
    }
    char buf[256];
    std::snprintf(buf, sizeof buf, "step %lld/%lld · loss %.4f · %s tok/s · ETA %s", (long long)done,
                  (long long)end, loss, rate(tokensPerS).c_str(), duration(eta).c_str());
    if (tty) {
      std::fprintf(stderr, "\r\033[K%s", buf);
      drawn = true;
      lastDraw = now;
    } else {
      std::fprintf(stderr, "%s\n", buf);
    }
    std::fflush(stderr);
  }

  /// A line that stays: on a terminal the progress line is cleared first and redrawn
  /// by the next step.
  void line(const std::string &text, bool always = false) {
    if (silent || (quiet && !always))
      return;
    clear();
    std::fprintf(stderr, "%s\n", text.c_str());
    std::fflush(stderr);
  }

  /// Ends a progress line left on the terminal (before an error or the final line).
  void clear() {
    if (tty && drawn) {
      std::fputs("\r\033[K", stderr);
      drawn = false;
    }
  }

private:
  bool quiet, silent, tty;
  int64_t end, every = 1;
  bool drawn = false;
  std::chrono::steady_clock::time_point lastDraw;
};

// ---- The run.

/// The entry points planc generated.
struct Entries {
  planrt_grad_fn grad;
  planrt_sumsq_fn sumsq;
  planrt_update_fn update;
  planrt_eval_fn eval;
  planrt_step_fn step;
  planrt_program_fn gather, release;
  void *const *stages;  ///< pipeline: per stage forward, backward, update
  int64_t nstages;
};

class Trainer {
public:
  Trainer(const Manifest &m, const Options &o, const Entries &e, planrt_mesh *mesh)
      : m(m), o(o), e(e), end(o.steps ? *o.steps : m.steps),
        progress(o.quiet, end, planrt_mesh_rank(mesh) > 0) {
    ctx.mesh = mesh;
    rank0 = planrt_mesh_rank(mesh) <= 0;
  }

  ~Trainer() {
    watchdog.reset();
    if (arenaReserved)
      planrt_arena_release();
    if (log)
      planrt_log_close(log);
    if (train)
      planrt_data_close(train);
    if (val)
      planrt_data_close(val);
  }

  int run() {
    bool entries = e.grad && e.sumsq && e.update;
    if (m.pipeline > 1) {
      entries = e.stages && e.nstages == m.pipeline;
      for (int64_t i = 0; entries && i < 3 * m.pipeline; ++i)
        entries = e.stages[i] != nullptr;
    }
    if (!entries || !e.step || !e.gather || !e.release)
      return error(fail(PLANRT_ERR_ARG, "the executable lacks one of its entry points"));
    if (planrt_status s = prepare())
      return error(s);
    if (ctx.mesh) {
      // Ranks finish loading at different times (a large --resume): start together, so
      // that the watchdog times collectives, not the slowest rank's start.
      float ready = 0;
      if (planrt_status s = planrt_mesh_agree(ctx.mesh, &ready))
        return error(s);
      // Launchers name a dead process by its pid: say which pid is which rank.
      int64_t devices = m.dataParallel * m.tensorParallel * m.pipeline;
      std::vector<char> ranks(size_t(64 * devices + 64));
      planrt_mesh_describe(ctx.mesh, ranks.data(), ranks.size());
      if (rank0)
        std::fprintf(stderr, "planrt: %lld ranks: %s\n", (long long)devices, ranks.data());
      watchdog = std::make_unique<planrt::Watchdog>(ctx, o.commTimeout);
    }
    if (start >= end) {
      progress.line("nothing to do: the run starts at step " + std::to_string(start) + " and ends at step " +
                        std::to_string(end),
                    true);
      return finish();
    }
    for (int64_t s = start; s < end; ++s)
      if (planrt_status st = step(s))
        return error(st);
    progress.clear();
    std::string summary = "done · " + std::to_string(end - start) + " steps (to step " + std::to_string(end) +
                          ") · final loss ";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.4f", lastLoss);
    summary += std::string(buf) + " · mean " + rate(double(tokensPerStep()) * double(end - start) / stepSeconds) +
               " tok/s";
    if (ctx.mesh) {
      char share[200];
      if (m.pipeline > 1)
        std::snprintf(share, sizeof share,
                      " (%lld data- × %lld tensor-parallel ranks × %lld pipeline stages; communication %.1f%% of step "
                      "time)",
                      (long long)m.dataParallel, (long long)m.tensorParallel, (long long)m.pipeline,
                      stepSeconds > 0 ? 100.0 * stepComm / stepSeconds : 0.0);
      else if (tensorParallel())
        std::snprintf(share, sizeof share, " (%lld data- × %lld tensor-parallel ranks; communication %.1f%% of step time)",
                      (long long)m.dataParallel, (long long)m.tensorParallel,
                      stepSeconds > 0 ? 100.0 * stepComm / stepSeconds : 0.0);
      else
        std::snprintf(share, sizeof share, " (%lld data-parallel ranks; communication %.1f%% of step time)",
                      (long long)m.dataParallel, stepSeconds > 0 ? 100.0 * stepComm / stepSeconds : 0.0);
      summary += share;
    }
    char mem[160];
    std::snprintf(mem, sizeof mem, " · step buffers peak %.1f MiB · device memory peak %.1f MiB",
                  double(maxMemPeak) / (1 << 20), double(planrt_mem_total_peak()) / (1 << 20));
    summary += mem;
    if (arenaReserved) {
      std::snprintf(mem, sizeof mem, " (arena %.1f MiB: %.1f MiB of state, %.1f MiB of step buffers)",
                    double(m.rankStateBytes + m.rankStepBytes) / (1 << 20), double(m.rankStateBytes) / (1 << 20),
                    double(m.rankStepBytes) / (1 << 20));
      summary += mem;
    }
    if (!lastCheckpoint.empty())
      summary += " · checkpoint " + lastCheckpoint;
    progress.line(summary, true);
    return finish();
  }

private:
  int error(planrt_status) {
    progress.clear();
    if (rank0 || !agreed)  // a failure every rank has alike is reported once
      std::fprintf(stderr, "planrt: error: %s\n", planrt_last_error());
    std::fflush(stderr);
    // Peers blocked in a collective with this rank would wait for ever: stop the job —
    // unless every rank fails here alike (a non-finite loss or norm, reduced over the
    // ranks), when they all return and finalize MPI, so that rank 0's log and message
    // are complete.
    if (ctx.mesh && !agreed)
      planrt_mesh_abort(ctx.mesh, kExitError);
    return kExitError;
  }

  int finish() {
    if (!o.exportFile.empty())
      if (planrt_status s = exportConsolidated(o.exportFile))
        return error(s);
    return 0;
  }

  int64_t tokensPerStep() const { return m.batch * m.seq; }

  bool checkpointing() const { return !checkpointDir.empty() && checkpointEvery > 0; }

  bool evaluating() const { return val && (e.eval || m.pipeline > 1) && m.evalEvery > 0 && m.evalBatches > 0; }

  // ---- Buffers and this rank's pieces.

  int bufferId(const std::string &name) const {
    for (size_t i = 0; i < m.buffers.size(); ++i)
      if (m.buffers[i].name == name)
        return int(i);
    return -1;
  }
  float *data(int id) { return ctx.buffers[size_t(id)].data; }
  bool arenaReserved = false;
  int64_t pieceFloats(int g) const { return (m.groupEnd[g] - m.groupBegin[g]) / m.dataParallel; }
  /// Where this rank's piece of group g starts in the flat layout.
  int64_t pieceBegin(int g) const { return m.groupBegin[g] + ctx.dataRank * pieceFloats(g); }
  /// This rank's piece of group g in a state buffer (master, exp_avg, exp_avg_sq):
  /// the buffer holds only the pieces when sharded, else everything.
  float *piece(int id, int g) { return data(id) + (m.sharded ? (g == 0 ? 0 : pieceFloats(0)) : pieceBegin(g)); }

  // ---- Tensor parallelism: this rank's pieces of whole parameters.

  bool tensorParallel() const { return m.tensorParallel > 1; }
  int64_t tensorCoord() const {
    return m.tensorAxis >= 0 && ctx.mesh ? planrt_mesh_coord(ctx.mesh, m.tensorAxis) : 0;
  }

  /// f(local, whole, n) for each run of n contiguous elements that tensor rank c holds
  /// of parameter p (planrt::forEachRun).
  template <typename F>
  static void runs(const Param &p, int64_t c, F f) {
    planrt::forEachRun(pieceOf(p), c, f);
  }
  /// This rank's piece of p, as the checkpoint layout describes it.
  static planrt::FlatParam pieceOf(const Param &p) {
    planrt::FlatParam out{p.name, p.offset, p.count};
    out.replica = p.replica;
    out.shape = p.shape;
    out.blocks = p.blocks;
    out.splitDim = p.splitDim;
    out.parts = p.parts;
    return out;
  }

  /// This rank's flat buffer (numFloats) from a buffer of whole parameters (fullFloats).
  std::vector<float> toLocal(const float *whole) const {
    if (!tensorParallel())
      return std::vector<float>(whole, whole + m.numFloats);
    std::vector<float> local(size_t(m.numFloats), 0.0f);
    int64_t c = tensorCoord();
    for (const Param &p : m.params)
      runs(p, c, [&](int64_t l, int64_t w, int64_t n) {
        std::memcpy(local.data() + p.offset + l, whole + p.fullOffset + w, size_t(n) * sizeof(float));
      });
    return local;
  }

  /// Whole parameters from every tensor rank's flat buffer: collective over the tensor axis.
  planrt_status toWhole(const std::vector<float> &local, std::vector<float> &whole) {
    if (!tensorParallel()) {
      whole = local;
      return PLANRT_OK;
    }
    std::vector<float> all(size_t(m.numFloats * m.tensorParallel));
    {
      planrt::Waiting w(ctx, "all_gather over the tensor axis of the whole parameters");
      if (planrt_status s = planrt_all_gather(ctx.mesh, 1u << unsigned(m.tensorAxis), local.data(), m.numFloats,
                                              all.data()))
        return s;
    }
    whole.assign(size_t(m.fullFloats), 0.0f);
    for (int64_t c = 0; c < m.tensorParallel; ++c)
      for (const Param &p : m.params)
        runs(p, c, [&](int64_t l, int64_t w, int64_t n) {
          std::memcpy(whole.data() + p.fullOffset + w, all.data() + c * m.numFloats + p.offset + l,
                      size_t(n) * sizeof(float));
        });
    return PLANRT_OK;
  }

  /// As distribute, from buffers of whole parameters.
  void distributeWhole(const float *P, const float *M, const float *V) {
    if (!tensorParallel())
      return distribute(P, M, V);
    std::vector<float> p = toLocal(P), mm, v;
    if (M)
      mm = toLocal(M);
    if (V)
      v = toLocal(V);
    distribute(p.data(), M ? mm.data() : nullptr, V ? v.data() : nullptr);
  }

  /// The whole parameters and moments (collective): every rank's pieces gathered.
  planrt_status gatherWhole(std::vector<float> &P, std::vector<float> &M, std::vector<float> &V) {
    std::vector<float> p, mm, v;
    if (planrt_status s = gatherFull(p, mm, v))
      return s;
    if (planrt_status s = toWhole(p, P))
      return s;
    if (planrt_status s = toWhole(mm, M))
      return s;
    return toWhole(v, V);
  }

  /// Copies full flat buffers (any of them may be null) into this rank's state.
  void distribute(const float *P, const float *M, const float *V) {
    const float *full[3] = {P, M, V};
    int ids[3] = {master, expAvg, expAvgSq};
    for (int k = 0; k < 3; ++k) {
      if (!full[k])
        continue;
      if (!m.sharded) {
        std::memcpy(data(ids[k]), full[k], size_t(m.numFloats) * sizeof(float));
        continue;
      }
      for (int g = 0; g < 2; ++g)
        std::memcpy(piece(ids[k], g), full[k] + pieceBegin(g), size_t(pieceFloats(g)) * sizeof(float));
    }
    // Replicas of the parameters the gradient reads start equal to the master.
    if (P && m.sharded && data(params))
      std::memcpy(data(params), P, size_t(m.numFloats) * sizeof(float));
  }

  /// The full flat parameter and moment buffers, gathered from every rank's pieces.
  planrt_status gatherFull(std::vector<float> &P, std::vector<float> &M, std::vector<float> &V) {
    std::vector<float> *full[3] = {&P, &M, &V};
    int ids[3] = {master, expAvg, expAvgSq};
    for (int k = 0; k < 3; ++k) {
      full[k]->assign(size_t(m.numFloats), 0.0f);
      if (!m.sharded) {
        std::memcpy(full[k]->data(), data(ids[k]), size_t(m.numFloats) * sizeof(float));
        continue;
      }
      for (int g = 0; g < 2; ++g)
        if (pieceFloats(g) > 0) {
          planrt::Waiting w(ctx, "all_gather of the state for --export");
          if (planrt_status s = planrt_all_gather(ctx.mesh, m.dataMask, piece(ids[k], g), pieceFloats(g),
                                                  full[k]->data() + m.groupBegin[g]))
            return s;
        }
    }
    return PLANRT_OK;
  }

  /// Rank 0 writes the checkpoints' index after reading every rank's file: on many ranks
  /// the checkpoint directory must be one directory that all of them see (a shared file
  /// system), which is proven before step 0.
  planrt_status probeShared(const std::string &dir) {
    if (!ctx.mesh)
      return PLANRT_OK;
    std::string probe = dir + "/.planrt-shared-probe";
    float bad = 0;
    if (rank0) {
      std::FILE *f = std::fopen(probe.c_str(), "w");
      bad = f ? 0.0f : 1.0f;
      if (f)
        std::fclose(f);
    }
    if (planrt_status s = planrt_mesh_agree(ctx.mesh, &bad))
      return s;
    struct stat st;
    float missing = ::stat(probe.c_str(), &st) != 0 ? 1.0f : 0.0f, mine = missing;
    if (planrt_status s = planrt_mesh_agree(ctx.mesh, &missing))
      return s;
    if (rank0)
      ::unlink(probe.c_str());
    if (bad > 0 || missing > 0)
      return fail(PLANRT_ERR_IO,
                  "%s: the checkpoint directory must be one directory every rank sees (a shared file system); "
                  "%s",
                  dir.c_str(), mine > 0 ? "this rank does not see rank 0's files in it" : "another rank does not");
    return PLANRT_OK;
  }

  /// Everything that can fail before compute: data, files, directories, buffers,
  /// the initial parameters.
  planrt_status prepare() {
    ctx.dataRank = planrt_mesh_group_rank(ctx.mesh, m.dataMask);
    ctx.dataSize = m.dataParallel;
    ctx.batch = m.batch;
    ctx.micro = m.micro;
    ctx.seq = m.seq;
    ctx.grad = e.grad;
    ctx.sumsq = e.sumsq;
    ctx.update = e.update;
    if (m.pipeline > 1) {
      ctx.stage = m.stage;
      ctx.activationIn = m.activationIn;
      ctx.activationOut = m.activationOut;
      ctx.stageForward = reinterpret_cast<planrt_stage_fwd_fn>(e.stages[3 * m.stage]);
      ctx.stageBackward = reinterpret_cast<planrt_stage_bwd_fn>(e.stages[3 * m.stage + 1]);
      ctx.update = reinterpret_cast<planrt_update_fn>(e.stages[3 * m.stage + 2]);
    }
    planrt::setActiveStep(&ctx);
    if (tensorParallel() || m.pipeline > 1) {
      // The gradient norm counts replicated parameters on the group's first rank only.
      ctx.tensorCoord = tensorCoord();
      ctx.tensorSize = m.tensorParallel;
      for (int g = 0; g < 2; ++g) {
        ctx.pieceBegin[g] = m.sharded ? pieceBegin(g) : m.groupBegin[g];
        ctx.pieceFloats[g] = m.sharded ? pieceFloats(g) : m.groupEnd[g] - m.groupBegin[g];
      }
      for (const Param &p : m.params)
        ctx.counted.push_back({p.offset, p.count, (p.splitDim >= 0 || ctx.tensorCoord == 0) && !p.replica});
    }
    // Data: open and validate every file, and draw the first sample.
    std::vector<std::string> trainFiles = o.data.empty() ? m.data : o.data;
    if (trainFiles.empty())
      return fail(PLANRT_ERR_ARG, "no training data: the plan names none and no --data was given");
    std::vector<const char *> patterns;
    for (const std::string &f : trainFiles)
      patterns.push_back(f.c_str());
    if (planrt_status s = planrt_data_open(patterns.data(), patterns.size(), m.seed, m.vocab, &train))
      return s;
    ctx.train = train;
    ctx.tokens.resize(size_t(m.micro * m.seq));
    ctx.targets.resize(size_t(m.micro * m.seq));
    int32_t *tokens = ctx.tokens.data(), *targets = ctx.targets.data();
    if (planrt_status s = planrt_data_sample(train, 0, m.seq, tokens, targets))
      return s;
    std::vector<std::string> valFiles = o.val.empty() ? m.val : o.val;
    if (!valFiles.empty() && m.evalEvery > 0 && m.evalBatches > 0) {
      patterns.clear();
      for (const std::string &f : valFiles)
        patterns.push_back(f.c_str());
      if (planrt_status s = planrt_data_open(patterns.data(), patterns.size(), m.seed, m.vocab, &val))
        return s;
      // Windows are consecutive: if the last one exists, all do.
      uint64_t last = uint64_t(m.evalBatches * m.micro * m.dataParallel - 1);
      if (planrt_data_window(val, last, m.seq, tokens, targets) != PLANRT_OK)
        return fail(PLANRT_ERR_FORMAT,
                    "%s: the validation data holds fewer than eval_batches × micro × data-parallel ranks = %lld "
                    "windows of %lld tokens",
                    valFiles.front().c_str(), (long long)(last + 1), (long long)m.seq + 1);
    }

    // Output files and directories, before any compute.
    checkpointDir = o.checkpointDir.empty() ? m.checkpointDir : o.checkpointDir;
    checkpointEvery = o.checkpointEvery ? *o.checkpointEvery : m.checkpointEvery;
    if (checkpointing()) {
      if (planrt_status s = prepareDirectory(checkpointDir, "checkpoint directory"))
        return s;
      if (planrt_status s = probeWritable(checkpointDir, "checkpoint directory"))
        return s;
      if (planrt_status s = probeShared(checkpointDir))
        return s;
    } else if (!o.checkpointDir.empty()) {
      progress.line("planrt: warning: --checkpoint-dir is given but the checkpoint interval is 0; no "
                    "checkpoint is written (see --checkpoint-every)",
                    true);
    }
    if (!o.saveInit.empty())
      if (planrt_status s = probeWritable(parentOf(o.saveInit), "directory of --save-init"))
        return s;
    if (!o.saveGrads.empty()) {
      if (m.sharded)
        return fail(PLANRT_ERR_ARG, "--save-grads needs the whole gradient, which ZeRO stage %lld shards; "
                                    "use a ZeRO-0 (DDP) or one-device build",
                    (long long)m.zero);
      if (planrt_status s = probeWritable(parentOf(o.saveGrads), "directory of --save-grads"))
        return s;
    }
    if (!o.exportFile.empty())
      if (planrt_status s = probeWritable(parentOf(o.exportFile), "directory of --export"))
        return s;
    if (!o.log.empty() && rank0)
      if (planrt_status s = planrt_log_open(o.log.c_str(), &log))
        return s;

    // Buffers: the step program's table, all but the transient ones now; each at its
    // place in the executable's arena if the compiler planned one.
    unsigned char *arena = nullptr;
    if (m.arena && !(arena = static_cast<unsigned char *>(planrt_arena_reserve(uint64_t(m.rankStateBytes),
                                                                               uint64_t(m.rankStepBytes)))))
      return PLANRT_ERR_ARG;  // planrt_arena_reserve said why
    arenaReserved = arena != nullptr;
    for (const BufferSpec &b : m.buffers) {
      planrt::Buffer &buf = ctx.buffers.emplace_back();
      buf.name = b.name;
      buf.lifetime = b.lifetime;
      buf.floats = b.floats;
      bool mine = b.stage < 0 || b.stage == m.stage;  // another pipeline stage's buffers stay unallocated
      if (mine && arena)
        buf.place = reinterpret_cast<float *>(arena + b.offset);
      if (mine && b.lifetime != "transient" && !buf.allocate())
        return fail(PLANRT_ERR_ARG, "cannot allocate buffer '%s' of %lld floats", b.name.c_str(), (long long)b.floats);
    }
    params = bufferId(m.bufferName("params"));
    grads = bufferId(m.bufferName("grads"));
    master = bufferId(m.master);
    expAvg = bufferId(m.bufferName("exp_avg"));
    expAvgSq = bufferId(m.bufferName("exp_avg_sq"));
    stateId = bufferId("state");
    state = data(stateId);
    state[2] = float(m.lossScaleInit);
    names.clear();
    for (const Param &p : m.params) {
      names.push_back("optimizer.exp_avg." + p.name);
      names.push_back("optimizer.exp_avg_sq." + p.name);
    }

    // Initial state.
    if (!o.resume.empty())
      return resume();
    std::vector<float> P(size_t(m.fullFloats), 0.0f);
    if (!o.init.empty()) {
      if (planrt_status s = loadParams(o.init, P.data()))
        return s;
    } else {
      for (size_t i = 0; i < m.params.size(); ++i) {
        const Param &p = m.params[i];
        planrt_status s = p.init == "normal"
                              ? planrt_init_normal(P.data() + p.fullOffset, p.fullCount, 0, 0.0, p.std, m.seed,
                                                   uint64_t(p.index >= 0 ? p.index : int64_t(i)))
                              : planrt_init_fill(P.data() + p.fullOffset, p.fullCount, p.init == "ones" ? 1.0f : 0.0f);
        if (s)
          return s;
      }
    }
    if (!o.saveInit.empty())
      if (planrt_status s = saveParams(o.saveInit, "planc-params-1", P.data(), start, {}))
        return s;
    distributeWhole(P.data(), nullptr, nullptr);
    return PLANRT_OK;
  }

  /// Reads `name` (f32, the whole parameter's shape) from st into dst.
  static planrt_status read(planrt_st *st, const std::string &name, const Param &p, float *dst) {
    return planrt_st_read(st, name.c_str(), PLANRT_F32, int(p.fullShape.size()), p.fullShape.data(), dst);
  }

  planrt_status loadParams(const std::string &file, float *P) {
    planrt_st *st = nullptr;
    if (planrt_status s = planrt_st_open(file.c_str(), &st))
      return s;
    planrt_status s = PLANRT_OK;
    for (const Param &p : m.params)
      if ((s = read(st, p.name, p, P + p.fullOffset)))
        break;
    planrt_st_close(st);
    return s;
  }

  /// This rank's flat layout (shardedSave), or that of whole parameters (shardedLoad).
  std::vector<planrt::FlatParam> flatLayout(bool whole = false) const {
    std::vector<planrt::FlatParam> out;
    for (const Param &p : m.params)
      out.push_back(whole ? planrt::FlatParam{p.name, p.fullOffset, p.fullCount} : pieceOf(p));
    return out;
  }

  /// Resumes from the newest checkpoint in --resume: a single file or a sharded
  /// directory, written under this layout or any other data-parallel one.
  planrt_status resume() {
    std::string file;
    uint64_t fileStep = 0;
    bool sharded = false;
    if (planrt_status s = planrt::latestCheckpoint(o.resume, file, fileStep, sharded))
      return s;
    std::vector<float> P(size_t(m.fullFloats), 0.0f), M(P), V(P);
    std::map<std::string, std::string> meta;
    if (sharded) {
      std::vector<std::string> elsewhere;  // other pipeline stages' parameters
      for (const std::vector<Param> &stage : m.stageParams)
        for (const Param &p : stage)
          elsewhere.push_back(p.name);
      if (planrt_status s =
              planrt::shardedLoad(file, flatLayout(true), P.data(), M.data(), V.data(), meta, elsewhere))
        return s;
    } else {
      planrt_st *st = nullptr;
      if (planrt_status s = planrt_st_open(file.c_str(), &st))
        return s;
      std::unique_ptr<planrt_st, void (*)(planrt_st *)> guard(st, planrt_st_close);
      for (const char *key : {"format", "step", "plan", "model", "loss_scale", "loss_scale_good_steps",
                              "optimizer_steps"})
        if (const char *v = planrt_st_metadata(st, key))
          meta[key] = v;
      if (meta["format"] != "planc-ckpt-1")
        return fail(PLANRT_ERR_FORMAT, "%s: not a planc checkpoint (metadata format '%s', expected planc-ckpt-1)",
                    file.c_str(), meta["format"].c_str());
      for (size_t i = 0; i < m.params.size(); ++i) {
        const Param &p = m.params[i];
        if (planrt_status s = read(st, p.name, p, P.data() + p.fullOffset))
          return s;
        if (planrt_status s = read(st, names[2 * i], p, M.data() + p.fullOffset))
          return s;
        if (planrt_status s = read(st, names[2 * i + 1], p, V.data() + p.fullOffset))
          return s;
      }
    }
    std::optional<int64_t> step = meta.count("step") ? count(meta["step"]) : std::nullopt;
    if (!step)
      return fail(PLANRT_ERR_FORMAT, "%s: the metadata 'step' is '%s', not a step count", file.c_str(),
                  meta["step"].c_str());
    for (const char *key : {"plan", "model"}) {
      const std::string &now = std::string(key) == "plan" ? m.plan : m.model;
      if (meta.count(key) && now != meta[key])
        progress.line(std::string("planrt: warning: ") + file + " was written by " + key + " '" + meta[key] +
                          "'; this is " + key + " '" + now + "'",
                      true);
    }
    if (scaling()) {
      if (!meta.count("loss_scale") || !meta.count("loss_scale_good_steps") || !meta.count("optimizer_steps"))
        return fail(PLANRT_ERR_FORMAT, "%s: no loss_scale metadata, which an fp16 plan resumes from", file.c_str());
      state[2] = std::strtof(meta["loss_scale"].c_str(), nullptr);
      state[3] = std::strtof(meta["loss_scale_good_steps"].c_str(), nullptr);
      state[5] = std::strtof(meta["optimizer_steps"].c_str(), nullptr);
      if (!(state[2] > 0) || !std::isfinite(state[2]) || !(state[3] >= 0) || !(state[5] >= 0))
        return fail(PLANRT_ERR_FORMAT, "%s: the metadata loss_scale '%s' / loss_scale_good_steps '%s' are not valid",
                    file.c_str(), meta["loss_scale"].c_str(), meta["loss_scale_good_steps"].c_str());
    }
    distributeWhole(P.data(), M.data(), V.data());
    start = *step;
    progress.line("resuming from " + file + " at step " + std::to_string(start));
    return PLANRT_OK;
  }

  /// The metadata every file the driver writes carries.
  std::vector<std::string> metadata(const char *format, int64_t step) const {
    std::vector<std::string> meta{"format", format, "step", std::to_string(step), "plan", m.plan, "model", m.model,
                                  "seed", std::to_string(m.seed)};
    if (scaling()) {
      char scale[32], good[32], applied[32];
      std::snprintf(scale, sizeof scale, "%.9g", double(state[2]));
      std::snprintf(good, sizeof good, "%.9g", double(state[3]));
      std::snprintf(applied, sizeof applied, "%.9g", double(state[5]));
      meta.insert(meta.end(), {"loss_scale", scale, "loss_scale_good_steps", good, "optimizer_steps", applied});
    }
    return meta;
  }

  static std::vector<const char *> pointers(const std::vector<std::string> &v) {
    std::vector<const char *> out;
    for (const std::string &s : v)
      out.push_back(s.c_str());
    return out;
  }

  /// A whole tensor of the model and where its values lie (parameters, first and
  /// second moments).
  struct WholeTensor {
    const Param *p;
    const float *data[3];
  };
  /// The whole model's tensors from buffers of this rank's whole parameters (any of M and
  /// V may be null). Under a pipeline each stage holds part of the model: every stage's
  /// buffers are gathered over the pipeline axis into `store` (collective), and a tied
  /// parameter comes from the stage that owns it.
  planrt_status wholeModel(const float *P, const float *M, const float *V, std::vector<float> store[3],
                           std::vector<WholeTensor> &out) {
    const float *mine[3] = {P, M, V};
    out.clear();
    if (m.pipeline <= 1) {
      for (const Param &p : m.params)
        out.push_back({&p,
                       {P + p.fullOffset, M ? M + p.fullOffset : nullptr, V ? V + p.fullOffset : nullptr}});
      return PLANRT_OK;
    }
    int64_t most = *std::max_element(m.stageFullFloats.begin(), m.stageFullFloats.end());
    unsigned mask = 1u << unsigned(m.pipelineAxis);
    for (int k = 0; k < 3; ++k) {
      if (!mine[k])
        continue;
      std::vector<float> padded(size_t(most), 0.0f);
      std::memcpy(padded.data(), mine[k], size_t(m.fullFloats) * sizeof(float));
      store[k].assign(size_t(most * m.pipeline), 0.0f);
      planrt::Waiting w(ctx, "all_gather over the pipeline axis of the whole model");
      if (planrt_status s = planrt_all_gather(ctx.mesh, mask, padded.data(), most, store[k].data()))
        return s;
    }
    for (int64_t q = 0; q < m.pipeline; ++q)
      for (const Param &p : m.stageParams[size_t(q)])
        if (!p.replica) {
          WholeTensor t{&p, {nullptr, nullptr, nullptr}};
          for (int k = 0; k < 3; ++k)
            if (mine[k])
              t.data[k] = store[k].data() + q * most + p.fullOffset;
          out.push_back(t);
        }
    return PLANRT_OK;
  }

  /// Writes one buffer of whole parameters (or gradients) under the parameter names:
  /// rank 0 writes, after gathering the other pipeline stages' (collective).
  planrt_status saveParams(const std::string &file, const char *format, const float *buf, int64_t step,
                           std::vector<std::string> extra) {
    std::vector<float> store[3];
    std::vector<WholeTensor> whole;
    if (planrt_status s = wholeModel(buf, nullptr, nullptr, store, whole))
      return s;
    if (!rank0)
      return PLANRT_OK;
    std::vector<planrt_tensor> tensors;
    for (const WholeTensor &t : whole)
      tensors.push_back({t.p->name.c_str(), PLANRT_F32, int(t.p->fullShape.size()), t.p->fullShape.data(), t.data[0]});
    std::vector<std::string> meta = metadata(format, step);
    meta.insert(meta.end(), extra.begin(), extra.end());
    std::vector<const char *> mp = pointers(meta);
    return planrt_st_save(file.c_str(), tensors.data(), tensors.size(), mp.data(), mp.size() / 2);
  }

  /// The tensors of a consolidated checkpoint (Hugging Face names, optimizer state),
  /// from buffers of whole parameters.
  std::vector<planrt_tensor> consolidated(const std::vector<WholeTensor> &whole, std::vector<std::string> &keep) const {
    std::vector<planrt_tensor> tensors;
    keep.clear();
    for (const WholeTensor &t : whole) {
      keep.push_back("optimizer.exp_avg." + t.p->name);
      keep.push_back("optimizer.exp_avg_sq." + t.p->name);
    }
    for (size_t i = 0; i < whole.size(); ++i) {
      const Param &p = *whole[i].p;
      int rank = int(p.fullShape.size());
      tensors.push_back({p.name.c_str(), PLANRT_F32, rank, p.fullShape.data(), whole[i].data[0]});
      tensors.push_back({keep[2 * i].c_str(), PLANRT_F32, rank, p.fullShape.data(), whole[i].data[1]});
      tensors.push_back({keep[2 * i + 1].c_str(), PLANRT_F32, rank, p.fullShape.data(), whole[i].data[2]});
    }
    return tensors;
  }

  planrt_status checkFinite(int64_t s) {
    int ids[3] = {master, expAvg, expAvgSq};
    const char *what[3] = {"parameters", "optimizer.exp_avg", "optimizer.exp_avg_sq"};
    for (int k = 0; k < 3; ++k)
      if (planrt_status st = planrt_check_finite(data(ids[k]), m.buffers[size_t(ids[k])].floats, uint64_t(s), what[k]))
        return st;
    return PLANRT_OK;
  }

  planrt_status checkpoint(int64_t s) {
    // Never save a non-finite state, whatever the checks of the loss and norm missed.
    if (planrt_status st = checkFinite(s))
      return st;
    std::vector<std::string> meta = metadata("planc-ckpt-1", s + 1);
    char name[64];
    if (!ctx.mesh) {
      std::vector<float> store[3];
      std::vector<WholeTensor> whole;
      std::vector<std::string> keep;
      if (planrt_status st = wholeModel(data(master), data(expAvg), data(expAvgSq), store, whole))
        return st;
      std::vector<planrt_tensor> tensors = consolidated(whole, keep);
      std::vector<const char *> mp = pointers(meta);
      if (planrt_status st = planrt_ckpt_save(checkpointDir.c_str(), uint64_t(s + 1), int(m.checkpointKeep),
                                              tensors.data(), tensors.size(), mp.data(), mp.size() / 2))
        return st;
      std::snprintf(name, sizeof name, "/step-%08llu.safetensors", (unsigned long long)(s + 1));
    } else {
      planrt::StatePiece mine;
      for (int g = 0; g < 2; ++g) {
        mine.begin[g] = pieceBegin(g);
        mine.count[g] = pieceFloats(g);
        mine.params[g] = piece(master, g);
        mine.expAvg[g] = piece(expAvg, g);
        mine.expAvgSq[g] = piece(expAvgSq, g);
      }
      planrt::MeshPlace place{ctx.dataRank, m.dataParallel, tensorCoord(), m.tensorParallel, m.stage, m.pipeline};
      if (planrt_status st = planrt::shardedSave(ctx.mesh, checkpointDir, uint64_t(s + 1), int(m.checkpointKeep),
                                                 place, mine, flatLayout(), meta))
        return st;
      std::snprintf(name, sizeof name, "/step-%08llu/", (unsigned long long)(s + 1));
    }
    lastCheckpoint = checkpointDir + name;
    return PLANRT_OK;
  }

  /// --export: one checkpoint file in the single-device format, whatever the layout.
  planrt_status exportConsolidated(const std::string &file) {
    std::vector<float> P, M, V, store[3];
    std::vector<WholeTensor> whole;
    std::vector<std::string> keep;
    if (planrt_status s = gatherWhole(P, M, V))
      return s;
    if (planrt_status s = wholeModel(P.data(), M.data(), V.data(), store, whole))
      return s;
    if (!rank0)
      return PLANRT_OK;
    std::vector<planrt_tensor> tensors = consolidated(whole, keep);
    std::vector<std::string> meta = metadata("planc-ckpt-1", std::max(start, lastStep));
    std::vector<const char *> mp = pointers(meta);
    if (planrt_status s = planrt_st_save(file.c_str(), tensors.data(), tensors.size(), mp.data(), mp.size() / 2))
      return s;
    progress.line("exported " + file, true);
    return PLANRT_OK;
  }

  /// The mean loss over eval_batches × micro × data-parallel windows, the same windows
  /// whatever the layout: each data-parallel rank takes every d-th block of micro windows,
  /// and the sums are reduced over the data axes.
  planrt_status evaluate(int64_t s) {
    e.gather(&ctx);
    if (ctx.status)
      return fail(ctx.status, "%s", ctx.error.c_str());
    float sum = 0;
    int32_t *tokens = ctx.tokens.data(), *targets = ctx.targets.data();
    for (int64_t b = 0; b < m.evalBatches; ++b) {
      uint64_t first = uint64_t((b * m.dataParallel + ctx.dataRank) * m.micro);
      for (int64_t i = 0; i < m.micro; ++i)
        if (planrt_status st = planrt_data_window(val, first + uint64_t(i), m.seq, tokens + i * m.seq,
                                                  targets + i * m.seq)) {
          e.release(&ctx);
          return st;
        }
      float loss = 0;
      if (m.pipeline > 1) {
        if (planrt_status st = stageEval(tokens, targets, loss)) {
          e.release(&ctx);
          return st;
        }
      } else {
        planrt::BackendVector<float> out(1);  // written by generated code
        e.eval(data(params), tokens, targets, out.data());
        loss = out[0];
      }
      sum += loss;
    }
    e.release(&ctx);
    if (ctx.status)
      return fail(ctx.status, "%s", ctx.error.c_str());
    if (m.pipeline > 1) {  // the last stage computed the losses; the others add zero
      planrt::Waiting w(ctx, "all_reduce over the pipeline axis of the validation loss");
      if (planrt_status st = planrt_all_reduce(ctx.mesh, 1u << unsigned(m.pipelineAxis), &sum, 1, PLANRT_SUM))
        return st;
    }
    if (ctx.mesh && m.dataParallel > 1) {  // tensor ranks computed the same loss
      planrt::Waiting w(ctx, "all_reduce of the validation loss");
      if (planrt_status st = planrt_all_reduce(ctx.mesh, m.dataMask, &sum, 1, PLANRT_SUM))
        return st;
    }
    double mean = double(sum) / double(m.evalBatches * m.dataParallel);
    if (log)
      if (planrt_status st = planrt_log_eval(log, uint64_t(s), mean))
        return st;
    char buf[128];
    std::snprintf(buf, sizeof buf, "step %lld/%lld · val loss %.4f", (long long)(s + 1), (long long)end, mean);
    progress.line(buf);
    return PLANRT_OK;
  }

  /// One evaluation micro-batch through the pipeline: this stage's forward pass on the
  /// previous stage's activation, handed on to the next; the last stage's loss in `loss`
  /// (0 elsewhere).
  planrt_status stageEval(const int32_t *tokens, const int32_t *targets, float &loss) {
    unsigned axis = unsigned(m.pipelineAxis);
    planrt::BackendVector<float> in(size_t(std::max<int64_t>(m.activationIn, 1)), 0.0f),
        out(size_t(std::max<int64_t>(m.activationOut, 1)), 0.0f);
    if (m.stage > 0) {
      planrt::Waiting w(ctx, "receive of the evaluation activations");
      if (planrt_status st = planrt_recv(ctx.mesh, int(axis), m.stage - 1, in.data(), m.activationIn))
        return st;
    }
    ctx.stageForward(data(params), tokens, targets, in.data(), out.data());
    loss = 0;
    if (m.stage + 1 == m.pipeline) {
      loss = out[0];
      return PLANRT_OK;
    }
    planrt::Waiting w(ctx, "send of the evaluation activations");
    return planrt_send(ctx.mesh, int(axis), m.stage + 1, out.data(), m.activationOut);
  }

  static const char *nonFinite(double v) { return std::isnan(v) ? "NaN" : "infinite"; }

  /// Bytes this rank has sent so far, by collective (planrt_collective order).
  void commTotals(uint64_t out[4]) const {
    for (int k = 0; k < 4; ++k)
      out[k] = planrt_comm_bytes_total(ctx.mesh, planrt_collective(k));
  }

  planrt_status step(int64_t s) {
    auto t0 = std::chrono::steady_clock::now();
    uint64_t before[4], after[4], comm[4];
    commTotals(before);
    state[4] = 0;
    float scaleBefore = state[2];
    ctx.step = s;
    double commBefore = ctx.commSeconds;
    planrt_mem_reset_peak();
    // The step program: micro-batches, gradients, collectives, the update.
    e.step(&ctx, s);
    uint64_t memPeak = planrt_mem_peak();
    maxMemPeak = std::max(maxMemPeak, memPeak);
    stepComm += ctx.commSeconds - commBefore;
    if (ctx.status)
      return fail(ctx.status, "%s", ctx.error.c_str());
    commTotals(after);
    for (int k = 0; k < 4; ++k)
      comm[k] = after[k] - before[k];
    float loss = state[7];
    const double nan = std::numeric_limits<double>::quiet_NaN();
    bool skipped = scaling() && state[4] != 0;
    // With fp16 loss scaling an overflow is the update's to skip; otherwise it is fatal.
    if (!std::isfinite(loss) && !scaling()) {
      // The step is logged (its loss as null) so the log shows where training diverged.
      if (log)
        planrt_log_step(log, uint64_t(s), loss, nan, nan, nan, comm, memPeak, planrt_mem_total_peak());
      agreed = true;  // the loss is reduced over the data-parallel ranks
      return fail(PLANRT_ERR_ARG, "step %lld: the loss is %s; stopping before anything is saved", (long long)s,
                  nonFinite(loss));
    }
    if (!o.saveGrads.empty() && s == start) {
      char text[32];
      std::snprintf(text, sizeof text, "%.9g", double(loss));
      // With fp16 loss scaling G holds scaled gradients: the file has the true ones.
      std::vector<float> unscaled(data(grads), data(grads) + m.numFloats), whole;
      if (scaling())
        for (float &g : unscaled)
          g /= scaleBefore;
      // Under tensor parallelism the pieces are gathered into whole tensors (collective).
      if (planrt_status st = toWhole(unscaled, whole))
        return st;
      if (planrt_status st = saveParams(o.saveGrads, "planc-grads-1", whole.data(), s, {"loss", text}))
        return st;
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    stepSeconds += seconds;
    double tokensPerS = seconds > 0 ? double(tokensPerStep()) / seconds : nan;
    if (log)
      if (planrt_status st = planrt_log_step(log, uint64_t(s), loss, state[1], state[0], tokensPerS, comm, memPeak,
                                                       planrt_mem_total_peak()))
        return st;
    if (scaling() && log && (skipped || state[2] != scaleBefore))
      if (planrt_status st = planrt_log_loss_scale(log, uint64_t(s), state[2], skipped))
        return st;
    if (skipped) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "step %lld: fp16 gradients overflowed at loss scale %g; step skipped, scale now %g",
                    (long long)s, double(scaleBefore), double(state[2]));
      progress.line(buf);
      // The scale follows the reduced gradient norm, alike on every rank.
      if (!(state[2] >= 0x1p-24f) && (agreed = true))
        return fail(PLANRT_ERR_ARG,
                    std::isfinite(loss)
                        ? "step %lld: the fp16 loss scale fell to %g: the gradients overflow at every scale; "
                          "stopping before anything is saved"
                        : "step %lld: the fp16 loss scale fell to %g and the loss itself is not finite: the forward "
                          "pass overflows fp16, whatever the scale; stopping before anything is saved",
                    (long long)s, double(state[2]));
    } else if (!std::isfinite(state[0])) {
      agreed = true;  // the norm is reduced over the ranks
      return fail(PLANRT_ERR_ARG, "step %lld: the gradient norm is %s; stopping before anything is saved",
                  (long long)s, nonFinite(state[0]));
    }
    lastLoss = loss;
    int64_t done = s + 1;
    lastStep = done;
    double eta = stepSeconds / double(done - start) * double(end - done);
    progress.step(done, loss, double(tokensPerStep()) * double(done - start) / stepSeconds, eta);
    bool last = done == end;
    if (evaluating() && (done % m.evalEvery == 0 || last))
      if (planrt_status st = evaluate(s))
        return st;
    if (checkpointing() && (done % checkpointEvery == 0 || last))
      if (planrt_status st = checkpoint(s))
        return st;
    return PLANRT_OK;
  }

  const Manifest &m;
  const Options &o;
  Entries e;
  int64_t start = 0, end, lastStep = 0;
  Progress progress;
  bool rank0 = true;
  bool agreed = false;  ///< the failure being reported happens on every rank alike
  planrt_step_ctx ctx;
  std::unique_ptr<planrt::Watchdog> watchdog;
  planrt_data *train = nullptr, *val = nullptr;
  planrt_log *log = nullptr;
  std::string checkpointDir, lastCheckpoint;
  int64_t checkpointEvery = 0;
  int params = -1, grads = -1, master = -1, expAvg = -1, expAvgSq = -1, stateId = -1;
  float *state = nullptr;          ///< the step state of planrt.h (the "state" buffer)
  std::vector<std::string> names;  ///< exp_avg and exp_avg_sq names, two per parameter
  double stepSeconds = 0, stepComm = 0, lastLoss = 0;
  uint64_t maxMemPeak = 0;  ///< the most bytes the generated code held in a step
  bool scaling() const { return m.lossScaleKind != "none"; }
};

} // namespace

extern "C" int planrt_train_main(int argc, char **argv, const char *manifest, planrt_grad_fn grad,
                                 planrt_sumsq_fn sumsq, planrt_update_fn update, planrt_eval_fn eval,
                                 planrt_step_fn step, planrt_program_fn gather, planrt_program_fn release,
                                 void *const *stages, int64_t nstages) {
  // The step functions allocate and free the same activation buffers every step: keep
  // them in the heap (up to glibc's 32 MiB maximum) rather than mapping and unmapping
  // them, which costs a page fault per 4 KiB touched each step.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  planrt_mesh *mesh = nullptr;
  // No exception may leave this C function.
  try {
    planrt_set_rank(0);
    Options o;
    if (int rc = parseOptions(argc, argv, o))
      return rc;
    Manifest m;
    planrt_status parsed = parseManifest(manifest, m);
    if (o.help) {
      std::printf(kUsage, argc > 0 && argv[0] ? argv[0] : "train", parsed ? "?" : m.plan.c_str(),
                  parsed ? "?" : m.model.c_str());
      return 0;
    }
    if (parsed) {
      std::fprintf(stderr, "planrt: error: %s\n", planrt_last_error());
      return kExitError;
    }
    // More than one device: one process per device, started by mpirun (or srun).
    if (m.dataParallel * m.tensorParallel * m.pipeline > 1) {
      if (planrt_status s = planrt_mesh_init(&argc, &argv, m.sizes.data(), int(m.sizes.size()), &mesh)) {
        std::fprintf(stderr, "planrt: error: %s\n", planrt_last_error());
        return kExitError;
      }
    }
    // Pipeline parallelism: this rank's stage is its coordinate on the pipeline axis; it
    // reads that stage's parameters, and knows every stage's.
    std::vector<std::vector<Param>> stageParams;
    std::vector<int64_t> stageFullFloats;
    if (m.pipeline > 1) {
      int64_t mine = planrt_mesh_coord(mesh, m.pipelineAxis);
      for (int64_t k = 0; k < m.pipeline; ++k) {
        Manifest mk;
        if (parseManifest(manifest, mk, k)) {
          std::fprintf(stderr, "planrt: error: %s\n", planrt_last_error());
          planrt_mesh_finalize(mesh);
          return kExitError;
        }
        stageParams.push_back(mk.params);
        stageFullFloats.push_back(mk.fullFloats);
        if (k == mine)
          m = std::move(mk);
      }
      m.stageParams = stageParams;
      m.stageFullFloats = stageFullFloats;
    }
    int rc;
    {
      Trainer t(m, o, Entries{grad, sumsq, update, eval, step, gather, release, stages, nstages}, mesh);
      rc = t.run();
    }
    planrt_mesh_finalize(mesh);
    return rc;
  } catch (const std::exception &e) {
    fail(PLANRT_ERR_ARG, "internal error: %s", e.what());
  } catch (...) {
    fail(PLANRT_ERR_ARG, "internal error");
  }
  std::fprintf(stderr, "planrt: error: %s\n", planrt_last_error());
  std::fflush(stderr);
  if (mesh)
    planrt_mesh_abort(mesh, kExitError);  // the other ranks would wait in a collective
  return kExitError;
}
