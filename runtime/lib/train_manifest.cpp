// Reading a training executable's manifest (train_manifest.h): one reader per section,
// called in the order that decides which error a manifest with several gets.
#include "train_manifest.h"

#include "manifest_json.h"
#include "planrt_manifest.h"
#include "planrt_nf4.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace planrt::train {

using namespace planrt::manifest;

namespace {

void readHeader(const json &root, Manifest &m) {
  std::string version = text(root, key::format, "the manifest");
  if (version != format::kTrain)
    throw Malformed{"format '" + version + "'; this runtime reads " + format::kTrain};
  m.plan = text(root, key::plan, "the manifest");
  m.model = text(root, key::model, "the manifest");
}

/// The stages pipeline rank `stage` holds (stages[stage].chunks: stage r + j·p its j-th),
/// each with the activation it receives, from its predecessor's rank's table.
void readChunks(const json &stages, int64_t stage, Manifest &m) {
  auto chunksOf = [&](int64_t r) -> const json & {
    const json &c = field(stages[size_t(r)], key::chunks, "stages[" + std::to_string(r) + "]");
    if (!c.is_array() || c.empty())
      throw Malformed{"stages[" + std::to_string(r) + "].chunks is not a non-empty array"};
    return c;
  };
  int64_t each = int64_t(chunksOf(0).size());
  for (int64_t r = 1; r < m.pipeline; ++r)
    if (int64_t(chunksOf(r).size()) != each)
      throw Malformed{"stages[" + std::to_string(r) + "].chunks holds " + std::to_string(chunksOf(r).size()) +
                      " stages, stages[0].chunks " + std::to_string(each) + ": every rank holds as many"};
  m.stages = m.pipeline * each;
  auto chunk = [&](int64_t c) -> const json & { return chunksOf(c % m.pipeline)[size_t(c / m.pipeline)]; };
  auto where = [&](int64_t c) {
    return "stages[" + std::to_string(c % m.pipeline) + "].chunks[" + std::to_string(c / m.pipeline) + "]";
  };
  for (int64_t j = 0; j < each; ++j) {
    Manifest::Chunk c;
    c.stage = stage + j * m.pipeline;
    const json &o = chunk(c.stage);
    if (integer(o, key::stage, where(c.stage), 0, m.stages - 1) != c.stage)
      throw Malformed{where(c.stage) + ".stage is not " + std::to_string(c.stage) + ": rank r of p holds stages r, r + p, …"};
    if (c.stage > 0)
      c.activationIn = integer(chunk(c.stage - 1), key::activation, where(c.stage - 1), 1, kMaxFloats);
    if (c.stage + 1 < m.stages)
      c.activationOut = integer(o, key::activation, where(c.stage), 1, kMaxFloats);
    if (o.contains(key::saved))
      c.savedFloats = integer(o, key::saved, where(c.stage), 0, kMaxFloats);
    if (o.contains(key::wsaved))
      c.wsavedFloats = integer(o, key::wsaved, where(c.stage), 0, kMaxFloats);
    m.chunks.push_back(c);
  }
}

/// Pipeline parallelism: each pipeline rank has its own parameters (of the stages it
/// holds) and flat layout, and this rank reads its own; without, the top level holds the
/// one layout. Returns the object holding the layout; `in` is the JSON path prefix of its
/// fields.
const json &readPipeline(const json &root, int64_t stage, Manifest &m, std::string &in) {
  in = "";
  if (!root.contains(key::pipeline))
    return root;
  const json &pipe = root[key::pipeline];
  const json &stages = field(root, key::stages, "the manifest");
  if (!stages.is_array() || stages.size() < 2)
    throw Malformed{"stages is not an array of two stages or more"};
  m.pipeline = int64_t(stages.size());
  std::string axis = text(pipe, key::axis, "pipeline");
  m.stage = stage;
  if (stage < 0 || stage >= m.pipeline)
    throw Malformed{"pipeline stage " + std::to_string(stage) + " is not one of the stages"};
  const json &axes = field(field(root, key::mesh, "the manifest"), key::axes, "mesh");
  for (size_t a = 0; a < axes.size(); ++a)
    if (axes[a].is_string() && axes[a].get<std::string>() == axis)
      m.pipelineAxis = int(a);
  if (m.pipelineAxis < 0)
    throw Malformed{"pipeline.axis names '" + axis + "', which is not an axis"};
  readChunks(stages, stage, m);
  in = "stages[" + std::to_string(stage) + "].";
  return stages[size_t(stage)];
}

/// Tensor parallelism: how the parameter is cut over the tensor axis.
void readSplit(const json &sp, const std::string &where, Param &p) {
  p.splitDim = integer(sp, key::dim, where + ".split", 0, int64_t(p.shape.size()) - 1);
  p.parts = integer(sp, key::parts, where + ".split", 2, 65536);
  const json &blocks = field(sp, key::blocks, where + ".split");
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

/// A QLoRA base matrix's NF4 storage (planrt_nf4.h): its block, double quantization and
/// the floats it takes in the params buffer, which must be the layout's.
void readNf4(const json &q, const std::string &where, Param &p) {
  if (p.shape.size() != 2)
    throw Malformed{where + " is stored as NF4 but is not a matrix"};
  p.nf4.block = integer(q, key::block, where + ".nf4", 1, 4096);
  const json &dbl = field(q, key::double_quant, where + ".nf4");
  if (!dbl.is_boolean())
    throw Malformed{where + ".nf4.double_quant is not true or false"};
  p.nf4.dbl = dbl.get<bool>();
  p.nf4.floats = integer(q, key::floats, where + ".nf4", 1, kMaxFloats);
  int64_t expected = planrt_nf4_bytes(p.count, p.nf4.block, p.nf4.dbl) / 4;
  if (p.nf4.floats != expected)
    throw Malformed{where + ".nf4.floats is " + std::to_string(p.nf4.floats) + " but its NF4 storage takes " +
                    std::to_string(expected)};
}

/// One entry of params (or frozen), at JSON path `where`; m holds the ones before it;
/// it must end by float `end` of the params buffer (num_floats when 0).
Param readParam(const json &pj, std::string where, const Manifest &m, int64_t end = 0) {
  end = end ? end : m.numFloats;
  Param p;
  p.name = text(pj, key::name, where);
  if (p.name.empty())
    throw Malformed{where + ".name is empty"};
  where += " ('" + p.name + "')";
  const json &shape = field(pj, key::shape, where);
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
  p.offset = integer(pj, key::offset, where, 0, kMaxFloats);
  p.count = integer(pj, key::count, where, 0, kMaxFloats);
  if (p.count != elements)
    throw Malformed{where + ".count is " + std::to_string(p.count) + " but its shape has " + std::to_string(elements) +
                    " elements"};
  if (pj.contains(key::nf4))
    readNf4(pj[key::nf4], where, p);
  if (p.offset + p.stored() > end)
    throw Malformed{where + " ends at float " + std::to_string(p.offset + p.stored()) + ", past float " +
                    std::to_string(end) + " (num_floats" + (end == m.numFloats ? ")" : " + frozen_floats)")};
  p.init = text(pj, key::init, where);
  if (p.init == "normal" || p.init == "uniform") {
    const json &s = field(pj, key::std, where);
    if (!s.is_number() || !(s.get<double>() >= 0) || !std::isfinite(s.get<double>()))
      throw Malformed{where + ".std is " + s.dump() + ", not a finite number ≥ 0"};
    p.std = s.get<double>();
  } else if (p.init != "zeros" && p.init != "ones") {
    throw Malformed{where + ".init is '" + p.init + "'; expected normal, uniform, zeros or ones"};
  }
  for (const Param &q : m.params)
    if (q.name == p.name)
      throw Malformed{"two parameters are named '" + p.name + "'"};
  p.fullShape = p.shape;
  if (pj.contains(key::split))
    readSplit(pj[key::split], where, p);
  p.fullCount = p.splitDim < 0 ? p.count : p.count / p.shape[size_t(p.splitDim)] * p.fullShape[size_t(p.splitDim)];
  if (p.nf4.block && p.splitDim >= 0)
    throw Malformed{where + " is stored as NF4 but split over the tensor axis"};
  if (pj.contains(key::index))
    p.index = integer(pj, key::index, where, 0, kMaxDim);
  if (pj.contains(key::adapts))
    p.adapts = text(pj, key::adapts, where);
  if (pj.contains(key::qkv)) {
    const json &q = pj[key::qkv];
    int64_t sum = 0;
    for (const json &w : q.is_array() ? q : json::array()) {
      if (!w.is_number_integer() || w.get<int64_t>() < 1 || p.fullShape.size() != 2 ||
          w.get<int64_t>() > p.fullShape[1])
        throw Malformed{where + ".qkv holds " + w.dump() + ", not a width of its columns"};
      p.qkv.push_back(w.get<int64_t>());
      sum += p.qkv.back();
    }
    if (p.qkv.size() != 3 || p.fullShape.size() != 2 || sum != p.fullShape[1])
      throw Malformed{where + ".qkv is not three widths that make up its columns"};
  }
  if (pj.contains(key::replica)) {
    if (!pj[key::replica].is_boolean())
      throw Malformed{where + ".replica is not true or false"};
    p.replica = pj[key::replica].get<bool>();
  }
  return p;
}

/// The flat layout: num_floats and the parameters in it.
void readParams(const json &lay, const std::string &in, Manifest &m) {
  m.numFloats = integer(lay, key::num_floats, "the manifest", 1, kMaxFloats);
  const json &params = field(lay, key::params, "the manifest");
  if (!params.is_array() || params.empty())
    throw Malformed{in + "params is not a non-empty array"};
  for (size_t i = 0; i < params.size(); ++i) {
    m.params.push_back(readParam(params[i], in + "params[" + std::to_string(i) + "]", m));
    if (m.params.back().nf4.block)
      throw Malformed{in + "params[" + std::to_string(i) + "] is stored as NF4 but trains; only the frozen base is"};
  }
  // The parameters must not overlap in the flat buffers.
  std::vector<const Param *> order;
  for (const Param &p : m.params)
    order.push_back(&p);
  std::sort(order.begin(), order.end(), [](auto *a, auto *b) { return a->offset < b->offset; });
  for (size_t i = 1; i < order.size(); ++i)
    if (order[i - 1]->offset + order[i - 1]->count > order[i]->offset)
      throw Malformed{"parameters '" + order[i - 1]->name + "' and '" + order[i]->name + "' overlap"};
}

/// A fine-tuning plan's frozen base (in `lay`: the top level, or this rank's pipeline
/// stage) and its adapters' settings (none without `adapt`).
void readFrozen(const json &lay, const std::string &in, const json &root, Manifest &m) {
  if (!lay.contains(key::frozen))
    return;
  m.frozenFloats = integer(lay, key::frozen_floats, "the manifest", 1, kMaxFloats);
  const json &frozen = lay[key::frozen];
  if (!frozen.is_array() || frozen.empty())
    throw Malformed{"frozen is not a non-empty array"};
  std::vector<Param> trained = std::move(m.params);
  for (size_t i = 0; i < frozen.size(); ++i) {
    std::string where = in + "frozen[" + std::to_string(i) + "]";
    Param p = readParam(frozen[i], where, m, m.numFloats + m.frozenFloats);
    if (p.offset < m.numFloats || p.offset + p.stored() > m.numFloats + m.frozenFloats)
      throw Malformed{where + " does not lie after num_floats, within frozen_floats"};
    m.params.push_back(std::move(p)); // readParam's duplicate-name check covers both tables
  }
  m.frozen = std::move(m.params);
  m.params = std::move(trained);
  for (const Param &p : m.params)
    for (const Param &q : m.frozen)
      if (p.name == q.name)
        throw Malformed{"parameter '" + p.name + "' is both trained and frozen"};
  if (!root.contains(key::adapt))
    throw Malformed{"frozen parameters without adapt"};
  const json &a = root[key::adapt];
  if (text(a, key::kind, "adapt") != "lora")
    throw Malformed{"adapt.kind is not lora"};
  m.adapt.rank = integer(a, key::rank, "adapt", 1, kMaxDim);
  const json &alpha = field(a, key::alpha, "adapt");
  if (!alpha.is_number() || !(alpha.get<double>() > 0))
    throw Malformed{"adapt.alpha is not a positive number"};
  m.adapt.alpha = alpha.get<double>();
  m.adapt.targets = texts(a, key::targets, "adapt");
}

/// train's shape of the step: batch, its split, steps, seed, vocabulary, ZeRO stage.
void readTrainShape(const json &train, Manifest &m) {
  m.batch = integer(train, key::batch, "train", 1, kMaxDim);
  m.micro = integer(train, key::micro, "train", 1, kMaxDim);
  m.seq = integer(train, key::seq, "train", 1, kMaxDim);
  m.accumulation = integer(train, key::accumulation, "train", 1, kMaxDim);
  m.dataParallel = integer(train, key::data_parallel, "train", 1, kMaxDim);
  m.tensorParallel =
      train.contains(key::tensor_parallel) ? integer(train, key::tensor_parallel, "train", 1, kMaxDim) : 1;
  m.steps = integer(train, key::steps, "train", 0, kMaxSteps);
  m.seed = uint64_t(integer(train, key::seed, "train", 0, std::numeric_limits<int64_t>::max()));
  m.vocab = integer(train, key::vocab, "train", 1, kMaxDim);
  if (m.batch != m.micro * m.accumulation * m.dataParallel)
    throw Malformed{"train.batch " + std::to_string(m.batch) + " is not micro × accumulation × data_parallel = " +
                    std::to_string(m.micro * m.accumulation * m.dataParallel)};
  m.zero = train.contains(key::zero) ? integer(train, key::zero, "train", 0, 3) : 0;
}

/// The two parameter groups (weight decay or not) as spans of the flat layout.
void readGroups(const json &lay, Manifest &m) {
  const json &groups = field(lay, key::groups, "the manifest");
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
}

/// A federated plan's round: what the driver needs of it (the round program has the rest).
void readFederated(const json &root, Manifest &m) {
  if (!root.contains(key::federated))
    return;
  const json &f = root[key::federated];
  if (!f.is_object())
    throw Malformed{"federated must be an object"};
  m.fed.axisName = text(f, key::axis, "federated");
  m.fed.clients = integer(f, key::clients, "federated", 1, 65536);
  m.fed.rounds = integer(f, key::rounds, "federated", 1, kMaxSteps);
  m.fed.localSteps = integer(f, key::local_steps, "federated", 1, kMaxSteps);
  m.fed.sampled = integer(f, key::sampled, "federated", 1, m.fed.clients);
  const json &perClient = field(f, key::per_client, "federated");
  if (!perClient.is_boolean())
    throw Malformed{"federated.per_client must be true or false"};
  m.fed.perClient = perClient.get<bool>();
}

/// The device mesh, checked against train's data, tensor and pipeline parallelism.
void readMesh(const json &root, Manifest &m) {
  const json &mesh = field(root, key::mesh, "the manifest");
  m.axes = texts(mesh, key::axes, "mesh");
  const json &sizes = field(mesh, key::sizes, "mesh");
  if (!sizes.is_array() || sizes.size() != m.axes.size() || m.axes.empty() || m.axes.size() > 16)
    throw Malformed{"mesh.sizes does not give one size per axis"};
  m.perNode = mesh.contains(key::per_node) ? integer(mesh, key::per_node, "mesh", 1, 1 << 20) : 0;
  int64_t devices = 1, data = 1;
  for (const json &n : sizes) {
    if (!n.is_number_integer() || n.get<int64_t>() < 1 || n.get<int64_t>() > 65536)
      throw Malformed{"mesh.sizes holds " + n.dump() + ", not an axis size"};
    m.sizes.push_back(n.get<int64_t>());
    devices *= m.sizes.back();
  }
  for (const std::string &a : texts(mesh, key::data, "mesh")) {
    auto it = std::find(m.axes.begin(), m.axes.end(), a);
    if (it == m.axes.end())
      throw Malformed{"mesh.data names '" + a + "', which is not an axis"};
    m.dataMask |= 1u << unsigned(it - m.axes.begin());
    data *= m.sizes[size_t(it - m.axes.begin())];
  }
  std::string tensor = mesh.contains(key::tensor) ? text(mesh, key::tensor, "mesh") : "";
  if (!tensor.empty()) {
    auto it = std::find(m.axes.begin(), m.axes.end(), tensor);
    if (it == m.axes.end())
      throw Malformed{"mesh.tensor names '" + tensor + "', which is not an axis"};
    m.tensorAxis = int(it - m.axes.begin());
  }
  if (m.tensorParallel != (m.tensorAxis < 0 ? 1 : m.sizes[size_t(m.tensorAxis)]))
    throw Malformed{"train.tensor_parallel " + std::to_string(m.tensorParallel) +
                    " is not the size of the tensor axis"};
  if (m.pipelineAxis >= 0 && m.sizes[size_t(m.pipelineAxis)] != m.pipeline)
    throw Malformed{"the manifest has " + std::to_string(m.pipeline) + " stage tables for a pipeline axis of " +
                    std::to_string(m.sizes[size_t(m.pipelineAxis)])};
  if (!m.fed.axisName.empty()) {
    auto it = std::find(m.axes.begin(), m.axes.end(), m.fed.axisName);
    if (it == m.axes.end() || m.sizes[size_t(it - m.axes.begin())] != m.fed.clients)
      throw Malformed{"federated.axis '" + m.fed.axisName + "' is not a mesh axis of federated.clients ranks"};
    m.fed.axis = int(it - m.axes.begin());
  }
  if (data != m.dataParallel || devices != m.dataParallel * m.tensorParallel * m.pipeline * m.fed.clients)
    throw Malformed{"train.data_parallel " + std::to_string(m.dataParallel) + " × tensor_parallel " +
                    std::to_string(m.tensorParallel) + " × pipeline stages " + std::to_string(m.pipeline) +
                    " × federated clients " + std::to_string(m.fed.clients) + " is not the mesh's " +
                    std::to_string(devices) + " devices over its data, tensor, pipeline and federated axes"};
}

/// Whole parameters lie one after another (tensor parallelism; else as the flat layout).
void placeWholeParams(Manifest &m) {
  int64_t at = 0;
  for (Param &p : m.params) {
    if (p.splitDim >= 0 && p.parts != m.tensorParallel)
      throw Malformed{"parameter '" + p.name + "' is split in " + std::to_string(p.parts) +
                      " parts over a tensor axis of " + std::to_string(m.tensorParallel)};
    p.fullOffset = m.tensorParallel > 1 ? at : p.offset;
    at += p.fullCount;
  }
  m.fullFloats = m.tensorParallel > 1 ? at : m.numFloats;
  at = 0;
  for (Param &p : m.frozen) {
    if (p.splitDim >= 0 && p.parts != m.tensorParallel)
      throw Malformed{"frozen parameter '" + p.name + "' is split in " + std::to_string(p.parts) +
                      " parts over a tensor axis of " + std::to_string(m.tensorParallel)};
    p.fullOffset = at;
    at += p.fullCount;
  }
  m.frozenFullFloats = at;
}

/// The step program's buffers, checked against the flat layout and the ZeRO sharding.
void readSchedule(const json &root, Manifest &m) {
  const json &schedule = field(root, key::schedule, "the manifest");
  const json &buffers = field(schedule, key::buffers, "schedule");
  if (!buffers.is_array() || buffers.empty())
    throw Malformed{"schedule.buffers is not a non-empty array"};
  for (size_t i = 0; i < buffers.size(); ++i) {
    std::string where = "schedule.buffers[" + std::to_string(i) + "]";
    BufferSpec b{text(buffers[i], key::name, where), text(buffers[i], key::lifetime, where),
                 integer(buffers[i], key::floats, where, 0, kMaxFloats),
                 buffers[i].contains(key::stage) ? integer(buffers[i], key::stage, where, 0, m.pipeline - 1) : -1};
    if (b.lifetime != "persistent" && b.lifetime != "step" && b.lifetime != "transient")
      throw Malformed{where + ".lifetime is '" + b.lifetime + "'"};
    m.buffers.push_back(b);
  }
  m.master = m.bufferName(text(schedule, key::master, "schedule"));
  const json &sharded = field(schedule, key::sharded, "schedule");
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
  int64_t piece =
      m.sharded ? (m.groupEnd[0] - m.groupBegin[0] + m.groupEnd[1] - m.groupBegin[1]) / m.dataParallel : m.numFloats;
  if (floatsOf(m.bufferName("params")) != m.numFloats + m.frozenFloats || floatsOf(m.bufferName("grads")) != m.numFloats ||
      floatsOf("state") != 8 || floatsOf(m.master) != piece + (m.sharded ? 0 : m.frozenFloats) || floatsOf(m.bufferName("exp_avg")) != piece ||
      floatsOf(m.bufferName("exp_avg_sq")) != piece)
    throw Malformed{"schedule.buffers do not have the sizes of the flat layout"};
  // ZeRO-3 with adapters: each data-parallel rank keeps an equal piece of the frozen base.
  if (m.sharded && m.zero >= 3 && m.frozenFloats > 0 &&
      (m.frozenFloats % m.dataParallel != 0 || floatsOf(m.bufferName("frozen_shard")) != m.frozenFloats / m.dataParallel))
    throw Malformed{"schedule.buffers' frozen_shard is not an equal piece of frozen_floats"};
}

/// train.images: the image files' format, shape, classes and transform.
void readImages(const json &im, Manifest &m) {
  const char *where = "train.images";
  m.images.format = text(im, key::format, where);
  m.images.valFormat = im.contains(key::val_format) ? text(im, key::val_format, where) : m.images.format;
  for (auto [k, f] : {std::pair<const char *, const std::string *>{key::format, &m.images.format},
                      {key::val_format, &m.images.valFormat}})
    if (*f != "planc" && *f != "cifar10")
      throw Malformed{std::string("train.images.") + k + " is '" + *f + "', not planc or cifar10"};
  std::string mode = im.contains(key::batchnorm) ? text(im, key::batchnorm, where) : "sync";
  if (mode != "sync" && mode != "local")
    throw Malformed{"train.images.batchnorm is '" + mode + "', not sync or local"};
  m.images.batchnormSync = mode == "sync";
  if (im.contains(key::running)) {
    if (!im[key::running].is_array())
      throw Malformed{"train.images.running is not an array"};
    for (const json &layer : im[key::running])
      m.images.running.push_back({text(layer, key::name, "train.images.running[]"),
                                  integer(layer, key::channels, "train.images.running[]", 1, kMaxDim)});
  }
  m.images.channels = integer(im, key::channels, where, 1, kMaxDim);
  m.images.height = integer(im, key::height, where, 1, kMaxDim);
  m.images.width = integer(im, key::width, where, 1, kMaxDim);
  m.images.classes = integer(im, key::classes, where, 1, kMaxDim);
  planrt_image_transform &t = m.images.transform;
  t.crop_pad = int32_t(integer(im, key::crop, where, 0, 1 << 16));
  if (!im.contains(key::flip) || !im[key::flip].is_boolean())
    throw Malformed{"train.images.flip is not true or false"};
  t.flip = im[key::flip].get<bool>();
  std::vector<double> mean = numbers(im, key::mean, where), std = numbers(im, key::std, where);
  if (mean.size() != std.size() || mean.size() > 4 || (!mean.empty() && mean.size() != size_t(m.images.channels)))
    throw Malformed{"train.images.mean and std hold one number per channel (at most 4), or none"};
  t.normalize = !mean.empty();
  for (size_t c = 0; c < mean.size(); ++c) {
    t.mean[c] = float(mean[c]);
    t.std[c] = float(std[c]);
  }
}

/// train's settings of the run: data, evaluation, checkpoints, fp16 loss scaling.
void readTrainRun(const json &train, Manifest &m) {
  m.data = texts(train, key::data, "train");
  if (train.contains(key::precision)) {
    m.precision = text(train, key::precision, "train");
    if (m.precision != "fp32" && m.precision != "bf16" && m.precision != "fp16")
      throw Malformed{"train.precision is '" + m.precision + "', not fp32, bf16 or fp16"};
  }
  m.val = train.contains(key::val) ? texts(train, key::val, "train") : std::vector<std::string>{};
  if (train.contains(key::images))
    readImages(train[key::images], m);
  if (train.contains(key::tokenizer)) {
    m.tokenizer = text(train, key::tokenizer, "train");
    for (auto [k, flag] : {std::pair<const char *, bool *>{key::data_text, &m.dataText}, {key::val_text, &m.valText}})
      if (train.contains(k)) {
        if (!train[k].is_boolean())
          throw Malformed{std::string("train.") + k + " is not true or false"};
        *flag = train[k].get<bool>();
      }
  }
  m.evalEvery = train.contains(key::eval_every) ? integer(train, key::eval_every, "train", 0, kMaxSteps) : 0;
  m.evalBatches = train.contains(key::eval_batches) ? integer(train, key::eval_batches, "train", 0, kMaxDim) : 0;
  if (train.contains(key::checkpoint)) {
    const json &c = train[key::checkpoint];
    m.checkpointDir = text(c, key::dir, "train.checkpoint");
    m.checkpointEvery = integer(c, key::every, "train.checkpoint", 0, kMaxSteps);
    m.checkpointKeep = integer(c, key::keep, "train.checkpoint", 0, std::numeric_limits<int>::max());
  }
  if (train.contains(key::init)) {
    const json &i = train[key::init];
    m.initPath = text(i, key::path, "train.init");
    m.initFormat = text(i, key::format, "train.init");
    if (m.initPath.empty() || (m.initFormat != "planc" && m.initFormat != "hf"))
      throw Malformed{"train.init needs a path and the format planc or hf"};
  }
  if (train.contains(key::loss_scale)) {
    const json &l = train[key::loss_scale];
    m.lossScaleKind = text(l, key::kind, "train.loss_scale");
    if (m.lossScaleKind != "none" && m.lossScaleKind != "dynamic" && m.lossScaleKind != "static")
      throw Malformed{"train.loss_scale.kind is '" + m.lossScaleKind + "'; expected none, dynamic or static"};
    const json &init = field(l, key::init, "train.loss_scale");
    if (!init.is_number() || !(init.get<double>() > 0) || !std::isfinite(init.get<double>()))
      throw Malformed{"train.loss_scale.init must be a positive number"};
    m.lossScaleInit = init.get<double>();
  }
}

/// Offloaded state: where the optimizer's moments and the parameter shard live (nvme
/// only in this version; the parameters with the moments, in chunks of one size).
void readOffload(const json &root, Manifest &m) {
  if (!root.contains(key::offload))
    return;
  const json &off = root[key::offload];
  if (!off.is_object())
    throw Malformed{"offload must be an object"};
  int64_t chunks[2] = {0, 0};
  for (const auto &[what, place] : off.items()) {
    std::string where = "offload." + what;
    if (what != key::optimizer && what != key::params)
      throw Malformed{where + ": this runtime offloads the optimizer state and the parameters only"};
    std::string target = text(place, key::target, where);
    if (target != "nvme")
      throw Malformed{where + ".target is '" + target + "'; this runtime offloads to nvme only"};
    std::string dir = text(place, key::dir, where);
    const json &buffer = field(place, key::buffer, where);
    if (!buffer.is_number_integer() || buffer.get<int64_t>() < offload::kAlign ||
        buffer.get<int64_t>() % offload::kAlign || buffer.get<int64_t>() > offload::kMaxBuffer)
      throw Malformed{where + ".buffer must be a multiple of " + std::to_string(offload::kAlign) + " bytes up to " +
                      std::to_string(offload::kMaxBuffer >> 20) + " MiB"};
    if (dir.empty())
      throw Malformed{where + ".dir is empty"};
    bool params = what == key::params;
    (params ? m.paramsOffloadDir : m.offloadDir) = dir;
    chunks[params] = buffer.get<int64_t>() / 4;
  }
  m.offloadChunk = chunks[0];
  if (!m.paramsOffloadDir.empty() && (m.offloadDir.empty() || chunks[1] != chunks[0]))
    throw Malformed{"offload.params: this runtime streams the parameter shard with the optimizer's moments: it needs "
                    "offload.optimizer on nvme with the same buffer"};
  if (!m.paramsOffloadDir.empty() && (!m.sharded || m.zero != 3))
    throw Malformed{"offload.params: the parameters are offloaded as ZeRO-3 shards, over more than one data rank"};
}

/// The executable's arena, if the compiler planned one: its sizes and every buffer's
/// offset in it.
void readMemory(const json &root, Manifest &m) {
  if (!root.contains(key::memory))
    return;
  const json &mem = root[key::memory];
  const json &buffers = root[key::schedule][key::buffers]; // read by readSchedule
  constexpr int64_t kMaxBytes = kMaxFloats * 4;
  m.arena = true;
  m.stateBytes = integer(mem, key::state_bytes, "memory", 0, kMaxBytes);
  m.stepBytes = integer(mem, key::step_bytes, "memory", 0, kMaxBytes);
  // Under a pipeline, this rank's stage may need less than the largest stage.
  auto ofStage = [&](const char *name, int64_t all) {
    if (!mem.contains(name))
      return all;
    const json &st = mem[name];
    if (!st.is_array() || int64_t(st.size()) != m.pipeline || !st[size_t(m.stage)].is_number_integer() ||
        st[size_t(m.stage)].get<int64_t>() < 0 || st[size_t(m.stage)].get<int64_t>() > all)
      throw Malformed{std::string("memory.") + name + " is not one size per pipeline stage, each at most " +
                      std::to_string(all)};
    return st[size_t(m.stage)].get<int64_t>();
  };
  m.rankStateBytes = ofStage(key::stage_state_bytes, m.stateBytes);
  m.rankStepBytes = ofStage(key::stage_step_bytes, m.stepBytes);
  for (size_t i = 0; i < m.buffers.size(); ++i) {
    BufferSpec &b = m.buffers[i];
    std::string where = "schedule.buffers[" + std::to_string(i) + "]";
    if (!buffers[i].contains(key::offset)) { // offloaded: held only while a checkpoint reads it back
      if (!m.offloadedMoment(b.name, b.stage))
        throw Malformed{where + " ('" + b.name + "') has no offset in the arena, and is not offloaded"};
      continue;
    }
    b.offset = integer(buffers[i], key::offset, where, 0, m.stateBytes);
    int64_t limit = b.stage < 0 || b.stage == m.stage ? m.rankStateBytes : m.stateBytes;
    if (b.offset % 256 || b.offset + b.floats * 4 > limit)
      throw Malformed{where + ".offset " + std::to_string(b.offset) + " does not place its " +
                      std::to_string(b.floats) + " floats at a 256-byte boundary inside the " + std::to_string(limit) +
                      " bytes of the arena's state part"};
  }
}

} // namespace

planrt_status parseManifest(const char *source, Manifest &m, int64_t stage) {
  if (!source)
    return fail(PLANRT_ERR_FORMAT, "the executable has no manifest");
  return planrt::manifest::parse([&] {
    json root;
    try {
      root = json::parse(source);
    } catch (const json::exception &e) {
      throw Malformed{std::string("not valid JSON: ") + e.what()};
    }
    readHeader(root, m);
    std::string in;
    const json &lay = readPipeline(root, stage, m, in);
    readParams(lay, in, m);
    readFrozen(lay, in, root, m);
    const json &train = field(root, key::train, "the manifest");
    readTrainShape(train, m);
    readGroups(lay, m);
    readFederated(root, m);
    readMesh(root, m);
    placeWholeParams(m);
    readSchedule(root, m);
    readTrainRun(train, m);
    readOffload(root, m); // before the arena, which leaves the offloaded buffers out
    readMemory(root, m);
  });
}

} // namespace planrt::train
