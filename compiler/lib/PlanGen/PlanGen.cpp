// Checked program → `plan` dialect. Every op carries the FileLineColLoc of the
// declaration (or the expression) it came from; graph ops are also named by the
// layer path, so later stages can say which model line caused what.
#include "plan/Compiler/PlanGen.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"

#include "plan/Dialect/Plan/IR/Plan.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace plan;
using namespace plan::pl;

namespace {

class PlanGen {
public:
  PlanGen(const sema::Program &program, const lang::Diags &diags)
      : program(program), diags(diags), ctx(diags.context()), b(ctx) {}

  OwningOpRef<ModuleOp> run() {
    ctx->getOrLoadDialect<PlanDialect>();
    OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(ctx));
    b.setInsertionPointToEnd(module->getBody());
    selectDecls();
    for (size_t i = 0; i < program.meshes.size(); ++i)
      if (meshes.count(i))
        genMesh(program.meshes[i]);
    for (size_t i = 0; i < program.models.size(); ++i)
      if (models.count(i))
        genModel(program.models[i]);
    for (size_t i = 0; i < program.retrievals.size(); ++i)
      if (retrievals.count(i))
        genRetrieval(program.retrievals[i]);
    for (const sema::Train &t : program.trains)
      if (t.loc.file == 0)
        genTrain(t);
    for (const sema::Generate &g : program.generates)
      if (g.loc.file == 0)
        genGenerate(g);
    return module;
  }

private:
  const sema::Program &program;
  const lang::Diags &diags;
  MLIRContext *ctx;
  OpBuilder b;
  std::set<size_t> meshes, models, retrievals;

  /// The main file's declarations and everything they reference.
  void selectDecls() {
    for (size_t i = 0; i < program.meshes.size(); ++i)
      if (program.meshes[i].loc.file == 0)
        meshes.insert(i);
    for (size_t i = 0; i < program.models.size(); ++i)
      if (program.models[i].loc.file == 0)
        models.insert(i);
    auto retrieval = [&](size_t i) {
      retrievals.insert(i);
      const sema::Retrieval &r = program.retrievals[i];
      if (r.embed.model >= 0)
        models.insert(r.embed.model);
      if (r.rerank.model >= 0)
        models.insert(r.rerank.model);
    };
    for (size_t i = 0; i < program.retrievals.size(); ++i)
      if (program.retrievals[i].loc.file == 0)
        retrieval(i);
    for (const sema::Train &t : program.trains)
      if (t.loc.file == 0) {
        models.insert(t.model);
        meshes.insert(t.mesh);
      }
    for (const sema::Generate &g : program.generates)
      if (g.loc.file == 0) {
        models.insert(g.model);
        if (g.context >= 0)
          retrieval(g.context);
      }
  }

  Location loc(ast::Loc l) { return diags.loc(l); }
  IntegerAttr i64(int64_t v) { return b.getI64IntegerAttr(v); }
  FloatAttr f64(double v) { return b.getF64FloatAttr(v); }
  StringAttr str(const std::string &s) { return b.getStringAttr(s); }
  FlatSymbolRefAttr sym(const std::string &s) { return FlatSymbolRefAttr::get(ctx, s); }
  ArrayAttr strs(const std::vector<std::string> &v) {
    SmallVector<StringRef> refs(v.begin(), v.end());
    return b.getStrArrayAttr(refs);
  }

  void genMesh(const sema::Mesh &m) {
    SmallVector<Attribute> axes;
    for (const sema::MeshAxis &a : m.axes)
      axes.push_back(AxisAttr::get(ctx, str(a.name), a.size));
    auto op = MeshOp::create(
        b, loc(m.loc), str(m.name),
        DeviceKindAttr::get(ctx, m.kind == sema::DeviceKind::CPU ? DeviceKind::cpu : DeviceKind::cuda), i64(m.perNode),
        i64(m.nodes), b.getArrayAttr(axes), m.memoryBytes ? i64(*m.memoryBytes) : IntegerAttr(),
        m.peakFlops ? f64(*m.peakFlops) : FloatAttr(), m.hbmBytesPerSecond ? f64(*m.hbmBytesPerSecond) : FloatAttr(),
        DictionaryAttr());
    if (!m.links.empty()) {
      SmallVector<NamedAttribute> links;
      for (auto &[name, bw] : m.links)
        links.push_back(b.getNamedAttr(name, f64(bw)));
      op.setLinksAttr(b.getDictionaryAttr(links));
    }
  }

  /// Parameters are held in fp32 (the master copy); lower precisions are the
  /// train plan's choice, applied in later stages.
  Type elementType(sema::DType d) {
    switch (d) {
    case sema::DType::F32:
      return b.getF32Type();
    case sema::DType::BF16:
      return b.getBF16Type();
    case sema::DType::F16:
      return b.getF16Type();
    case sema::DType::I32:
      return b.getIntegerType(32);
    }
    return b.getF32Type();
  }

  bool imageModel = false; ///< the model being generated is over images

  Type valueType(const sema::ValueType &t) {
    Type f32 = b.getF32Type();
    Type i32 = b.getIntegerType(32);
    int64_t dyn = ShapedType::kDynamic;
    switch (t.kind) {
    case sema::ValueType::Kind::Tokens:
      return RankedTensorType::get({dyn, dyn}, i32);
    case sema::ValueType::Kind::Labels: // one label per image
      return RankedTensorType::get({dyn, 1}, i32);
    case sema::ValueType::Kind::Images:
      return RankedTensorType::get({dyn, t.features ? t.features : dyn, t.pooled ? 1 : dyn, t.pooled ? 1 : dyn}, f32);
    case sema::ValueType::Kind::Positions:
      return RankedTensorType::get({dyn, dyn}, i32);
    case sema::ValueType::Kind::Hidden: // 0 features: a flatten of images of the data's size
      // A model over images has one position per image.
      return RankedTensorType::get({dyn, imageModel ? 1 : dyn, t.features ? t.features : dyn}, f32);
    case sema::ValueType::Kind::Scalar:
      return RankedTensorType::get({}, f32);
    }
    return f32;
  }

  void genModel(const sema::Model &m) {
    auto model =
        ModelOp::create(b, loc(m.loc), str(m.name), i64(m.layers), i64(m.vocab), i64(m.maxSeq), i64(m.numParameters()));
    imageModel = m.images;
    Type input = valueType({m.images ? sema::ValueType::Kind::Images : sema::ValueType::Kind::Tokens, 0});
    Type targets = valueType({m.images ? sema::ValueType::Kind::Labels : sema::ValueType::Kind::Tokens, 0});
    OpBuilder::InsertionGuard guard(b);
    Block *body = b.createBlock(&model.getBody(), {}, {input, targets}, {loc(m.loc), loc(m.loc)});
    for (const sema::Parameter &p : m.params) {
      std::optional<Init> init = symbolizeInit(sema::initName(p.init));
      auto op = ParamOp::create(b, NameLoc::get(str(p.path), loc(p.loc)), str(p.path),
                                TypeAttr::get(RankedTensorType::get(p.shape, elementType(p.dtype))), strs(p.dims),
                                InitAttr::get(ctx, *init), f64(p.init == sema::Init::Normal ? p.initStd : 0.0),
                                p.residualProjection ? b.getUnitAttr() : UnitAttr());
      (void)op;
    }
    SmallVector<Value> values = {body->getArgument(0), body->getArgument(1)};
    for (const sema::GraphOp &g : m.ops) {
      SmallVector<Value> inputs;
      for (int v : g.operands)
        inputs.push_back(values[v]);
      SmallVector<Attribute> params;
      for (int p : g.params)
        params.push_back(SymbolRefAttr::get(ctx, m.params[p].path));
      Location l = loc(g.loc);
      if (!g.layer.empty())
        l = NameLoc::get(str(g.layer), l);
      std::optional<LayerKind> kind = symbolizeLayerKind(sema::opKindName(g.kind));
      auto op =
          ApplyOp::create(b, l, valueType(g.result), LayerKindAttr::get(ctx, *kind), b.getArrayAttr(params), inputs);
      if (!g.layer.empty())
        op->setAttr("layer", str(g.layer));
      if (g.layerIndex >= 0)
        op->setAttr("layer_index", i64(g.layerIndex));
      switch (g.kind) {
      case sema::OpKind::Attention:
        op->setAttr("heads", i64(g.heads));
        op->setAttr("kv_heads", i64(g.kvHeads));
        op->setAttr("causal", b.getBoolAttr(g.causal));
        if (g.rope) {
          op->setAttr("rope", b.getBoolAttr(true));
          op->setAttr("rope_theta", f64(g.ropeTheta));
        }
        break;
      case sema::OpKind::LayerNorm:
      case sema::OpKind::RMSNorm:
        op->setAttr("eps", f64(g.eps));
        break;
      case sema::OpKind::Dropout:
        op->setAttr("p", f64(g.p));
        break;
      case sema::OpKind::Conv2d:
      case sema::OpKind::MaxPool:
        op->setAttr("kernel", i64(g.kernel));
        op->setAttr("stride", i64(g.stride));
        op->setAttr("pad", i64(g.pad));
        break;
      case sema::OpKind::BatchNorm:
        op->setAttr("eps", f64(g.eps));
        op->setAttr("momentum", f64(g.momentum));
        break;
      default:
        break;
      }
      values.push_back(op.getResult());
    }
    ReturnOp::create(b, loc(m.loc), values[m.result]);
  }

  /// `offload { … }` as #plan.parallel's offload dictionary; null when nothing moves.
  DictionaryAttr offloadAttr(const sema::Parallel &p) {
    SmallVector<NamedAttribute> places;
    for (auto [what, o] : {std::pair{"optimizer", &p.optimizerOffload}, std::pair{"params", &p.paramsOffload}}) {
      if (!o->any())
        continue;
      SmallVector<NamedAttribute> place{b.getNamedAttr("target", str(sema::offloadTargetName(o->target)))};
      if (o->target == sema::OffloadTarget::NVMe)
        place.append({b.getNamedAttr("dir", str(o->dir)), b.getNamedAttr("buffer", i64(o->bufferBytes))});
      places.push_back(b.getNamedAttr(what, b.getDictionaryAttr(place)));
    }
    return places.empty() ? DictionaryAttr() : b.getDictionaryAttr(places);
  }

  void genTrain(const sema::Train &t) {
    const sema::Mesh &mesh = program.meshes[t.mesh];
    (void)mesh;
    SmallVector<Attribute> data, replicate;
    for (auto &a : t.parallel.dataAxes)
      data.push_back(str(a));
    for (auto &a : t.parallel.replicate)
      replicate.push_back(str(a));
    PipelineSchedule schedule =
        *symbolizePipelineSchedule(t.parallel.schedule == sema::PipelineSchedule::GPipe         ? "gpipe"
                                   : t.parallel.schedule == sema::PipelineSchedule::OneFOneB    ? "one_f_one_b"
                                   : t.parallel.schedule == sema::PipelineSchedule::Interleaved ? "interleaved"
                                                                                                : "zb");
    auto parallel =
        ParallelAttr::get(ctx, b.getArrayAttr(data), t.parallel.zero, str(t.parallel.tensorAxis),
                          str(t.parallel.pipelineAxis), t.parallel.stages, schedule, b.getBoolAttr(t.parallel.sequence),
                          b.getArrayAttr(replicate), t.parallel.bucketBytes, offloadAttr(t.parallel),
                          t.parallel.keepActivations);
    SmallVector<NamedAttribute> shard;
    for (auto &[dim, axis] : t.shard)
      shard.push_back(b.getNamedAttr(dim, str(axis)));
    LossScale lossScale = t.lossScale == sema::LossScale::None      ? LossScale::none
                          : t.lossScale == sema::LossScale::Dynamic ? LossScale::dynamic
                                                                    : LossScale::fixed;
    DictionaryAttr adapt;
    if (t.adapt.rank > 0) {
      SmallVector<NamedAttribute> entries{
          b.getNamedAttr("rank", i64(t.adapt.rank)), b.getNamedAttr("alpha", f64(t.adapt.alpha)),
          b.getNamedAttr("targets", strs(t.adapt.targets)), b.getNamedAttr("matrices", strs(t.adapt.matrices))};
      if (t.adapt.quantize.block > 0)
        entries.push_back(b.getNamedAttr(
            "quantize", b.getDictionaryAttr({b.getNamedAttr("format", str("nf4")),
                                             b.getNamedAttr("block", i64(t.adapt.quantize.block)),
                                             b.getNamedAttr("double", b.getBoolAttr(t.adapt.quantize.dbl)),
                                             b.getNamedAttr("matrices", strs(t.adapt.quantize.matrices))})));
      adapt = b.getDictionaryAttr(entries);
    }
    bool images = t.images.any();
    auto op = TrainOp::create(
        b, loc(t.loc), str(t.name), sym(program.models[t.model].name), sym(program.meshes[t.mesh].name),
        strs(images ? t.images.files : t.data), strs(images ? t.valImages.files : t.val), i64(t.batch), i64(t.micro), i64(t.seq), i64(t.accumulation), parallel, b.getDictionaryAttr(shard),
        PrecisionAttr::get(ctx, *symbolizePrecision(sema::precisionName(t.precision))),
        LossScaleAttr::get(ctx, lossScale),
        t.lossScale == sema::LossScale::Static ? f64(t.staticLossScale) : FloatAttr(),
        RecomputeAttr::get(ctx, *symbolizeRecompute(sema::recomputeName(t.recompute))), f64(t.optimizer.lr),
        f64(t.optimizer.beta1), f64(t.optimizer.beta2), f64(t.optimizer.eps), f64(t.optimizer.weightDecay),
        LRScheduleAttr::get(ctx, *symbolizeLRSchedule(sema::lrScheduleName(t.schedule.kind))), i64(t.schedule.warmup),
        f64(t.schedule.minLr), f64(t.clip), i64(t.steps), i64(t.seed), i64(t.evalEvery), i64(t.evalBatches),
        i64(t.checkpointEvery), i64(t.checkpointKeep), str(t.checkpointDir), str(t.baseDir),
        t.init.path.empty() ? StringAttr() : str(t.init.path), t.init.path.empty() ? StringAttr() : str(t.init.format),
        adapt, t.tokenizer.empty() ? StringAttr() : str(t.tokenizer), t.dataText ? b.getUnitAttr() : UnitAttr(),
        t.valText ? b.getUnitAttr() : UnitAttr(), federatedAttr(t),
        str(t.optimizer.kind == sema::OptimizerKind::SGD ? "sgd" : "adamw"), f64(t.optimizer.momentum));
    if (images)
      op->setAttr(planrt::manifest::key::images,
                  imagesAttr(t.images, t.valImages, program.models[t.model].classes, t.parallel.batchnormSync));
  }

  /// images(…) of a train plan as plan.train's `images` dictionary (the manifest's
  /// train.images): the format, the shape, the transform, the class count.
  DictionaryAttr imagesAttr(const sema::ImageData &d, const sema::ImageData &val, int64_t classes,
                            bool batchnormSync) {
    namespace key = planrt::manifest::key;
    auto floats = [&](const std::vector<double> &v) {
      SmallVector<Attribute> out;
      for (double x : v)
        out.push_back(f64(x));
      return b.getArrayAttr(out);
    };
    auto format = [&](const sema::ImageData &i) {
      return str(i.format == sema::ImageData::Format::Cifar10 ? "cifar10" : "planc");
    };
    return b.getDictionaryAttr(
        {b.getNamedAttr(key::format, format(d)), b.getNamedAttr(key::val_format, format(val.any() ? val : d)),
         b.getNamedAttr(key::channels, i64(d.channels)), b.getNamedAttr(key::height, i64(d.height)),
         b.getNamedAttr(key::width, i64(d.width)), b.getNamedAttr(key::classes, i64(classes)),
         b.getNamedAttr(key::mean, floats(d.mean)), b.getNamedAttr(key::std, floats(d.std)),
         b.getNamedAttr(key::crop, i64(d.cropPad)), b.getNamedAttr(key::flip, b.getBoolAttr(d.flip)),
         b.getNamedAttr(key::batchnorm, str(batchnormSync ? "sync" : "local"))});
  }

  /// `federated = fedavg(…)` as plan.train's federated dictionary; null when not federated.
  DictionaryAttr federatedAttr(const sema::Train &t) {
    namespace key = planrt::manifest::key;
    const sema::Federated &f = t.federated;
    if (!f.any())
      return DictionaryAttr();
    bool adam = f.server.kind == sema::ServerOptimizer::Adam;
    DictionaryAttr server = b.getDictionaryAttr(
        {b.getNamedAttr(key::kind, str(adam ? "adam" : "sgd")), b.getNamedAttr(key::lr, f64(f.server.lr)),
         b.getNamedAttr(key::beta1, f64(f.server.beta1)), b.getNamedAttr(key::beta2, f64(f.server.beta2)),
         b.getNamedAttr(key::eps, f64(f.server.eps))});
    return b.getDictionaryAttr(
        {b.getNamedAttr(key::axis, str(f.axis)), b.getNamedAttr(key::clients, i64(f.clients)),
         b.getNamedAttr(key::rounds, i64(f.rounds)), b.getNamedAttr(key::local_steps, i64(f.localSteps)),
         b.getNamedAttr(key::fraction, f64(f.fraction)), b.getNamedAttr(key::sampled, i64(f.sampled())),
         b.getNamedAttr(key::weighting, str(f.weighting == sema::FedWeighting::Tokens ? "tokens" : "uniform")),
         b.getNamedAttr(key::prox, f64(f.prox)), b.getNamedAttr(key::secure, b.getBoolAttr(f.secure)),
         b.getNamedAttr(key::dp_clip, f64(f.dpClip)), b.getNamedAttr(key::dp_noise, f64(f.dpNoise)),
         b.getNamedAttr(key::per_client, b.getBoolAttr(t.dataPerClient)), b.getNamedAttr(key::server, server)});
  }

  DictionaryAttr fastTextOptions(const sema::Retrieval &r) {
    if (r.embed.kind != sema::EmbedKind::FastText)
      return {};
    const auto &ft = r.embed.fasttext;
    return b.getDictionaryAttr({b.getNamedAttr("model", str(ft.model)), b.getNamedAttr("epoch", i64(ft.epoch)),
                                b.getNamedAttr("min_count", i64(ft.minCount)), b.getNamedAttr("minn", i64(ft.minn)),
                                b.getNamedAttr("maxn", i64(ft.maxn)), b.getNamedAttr("bucket", i64(ft.bucket)),
                                b.getNamedAttr("threads", i64(ft.threads))});
  }

  void genRetrieval(const sema::Retrieval &r) {
    static const char *chunks[] = {"tokens", "sentences", "paragraphs", "semantic"};
    static const char *searches[] = {"hybrid", "vector", "keyword"};
    static const char *embeds[] = {"hashing", "model", "fasttext"};
    RetrievalOp::create(
        b, loc(r.loc), str(r.name), strs(r.corpus), str(r.manifest),
        ChunkKindAttr::get(ctx, *symbolizeChunkKind(chunks[int(r.chunk.kind)])), i64(r.chunk.size),
        i64(r.chunk.overlap), f64(r.chunk.kind == sema::ChunkKind::Semantic ? r.chunk.threshold : 0.0),
        EmbedKindAttr::get(ctx, *symbolizeEmbedKind(embeds[int(r.embed.kind)])), i64(r.embed.dim),
        r.embed.model >= 0 ? sym(program.models[r.embed.model].name) : FlatSymbolRefAttr(), str(r.embed.checkpoint),
        fastTextOptions(r), str(r.embed.pool), str(r.index.factory),
        MetricAttr::get(ctx, r.index.metric == sema::Metric::InnerProduct ? Metric::ip : Metric::l2),
        i64(r.index.nprobe), i64(r.index.efSearch), i64(r.index.efConstruction), SearchKindAttr::get(ctx, *symbolizeSearchKind(searches[int(r.search.kind)])),
        f64(r.search.vectorWeight), f64(r.search.keywordWeight), i64(r.search.top),
        FusionAttr::get(ctx, r.search.fusion == sema::Fusion::RRF ? Fusion::rrf : Fusion::weighted), i64(r.search.rrfK),
        r.rerank.enabled ? sym(program.models[r.rerank.model].name) : FlatSymbolRefAttr(), str(r.rerank.checkpoint),
        i64(r.rerank.top), GuardAttr::get(ctx, r.quarantine ? Guard::quarantine : Guard::off), str(r.store),
        str(r.baseDir));
  }

  void genGenerate(const sema::Generate &g) {
    GenerateOp::create(b, loc(g.loc), str(g.name), sym(program.models[g.model].name), str(g.checkpoint),
                       g.context >= 0 ? sym(program.retrievals[g.context].name) : FlatSymbolRefAttr(), i64(g.maxTokens),
                       f64(g.temperature), i64(g.topK), i64(g.seed), i64(g.window), str(g.baseDir),
                       g.tokenizer.empty() ? StringAttr() : str(g.tokenizer));
  }
};

} // namespace

OwningOpRef<ModuleOp> plan::genPlanModule(const sema::Program &program, const lang::Diags &diags) {
  return PlanGen(program, diags).run();
}

std::string plan::resolvePlanPath(llvm::StringRef baseDir, llvm::StringRef path) {
  if (path.empty() || llvm::sys::path::is_absolute(path))
    return path.str();
  llvm::SmallString<256> out(baseDir);
  llvm::sys::path::append(out, path);
  return std::string(out);
}
