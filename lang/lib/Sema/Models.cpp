// Block and model instantiation: binds parameters, expands blocks and `repeat`,
// creates the concrete parameter list (path, shape, logical dims, init) and the
// forward graph, and type-checks the tensor dataflow on the way.
#include "SemaInternal.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace plan;
using namespace plan::lang;
using ast::Expr;
using sema::GraphOp;
using sema::OpKind;
using sema::ValueType;

bool plan::lang::isLayerBinding(const DeclTable &decls, const ast::Expr &e,
                                const std::set<std::string> &definedBefore) {
  if (e.kind == ast::Expr::Kind::Repeat)
    return true;
  if (e.kind != ast::Expr::Kind::Call || e.lhs->kind != ast::Expr::Kind::Name)
    return false;
  const std::string &n = e.lhs->text;
  if (definedBefore.count(n))
    return false; // applying a local layer, or a tensor shadowing the name
  if (isLayerName(n))
    return true;
  const ast::Decl *d = decls.lookup(n);
  return d && d->kind == ast::Decl::Kind::Block;
}

namespace {

constexpr size_t kMaxParams = 1'000'000;
constexpr size_t kMaxOps = 4'000'000;
constexpr size_t kMaxBlockDepth = 64;
/// Parameter elements of one model: beyond 2^53 the cost model's doubles lose exactness.
constexpr int64_t kMaxElements = int64_t(1) << 53;

enum class Prim {
  Embedding,
  Linear,
  LayerNorm,
  RMSNorm,
  Attention,
  Dropout,
  Conv2d,
  BatchNorm,
  MaxPool,
  AvgPool,
  Shortcut
};

Signature layerSignature(Prim p) {
  switch (p) {
  case Prim::Embedding:
    return {"embedding", {{"n", true}, {"d", true}, {"dims", false}}};
  case Prim::Linear:
    return {"linear", {{"i", true}, {"o", true}, {"bias", false}, {"dims", false}}};
  case Prim::LayerNorm:
    return {"layernorm", {{"d", true}, {"eps", false}, {"bias", false}}};
  case Prim::RMSNorm:
    return {"rmsnorm", {{"d", true}, {"eps", false}}};
  case Prim::Attention:
    return {"attention",
            {{"d", true},
             {"heads", true},
             {"causal", false},
             {"kv_heads", false},
             {"rope", false},
             {"bias", false},
             {"rope_theta", false}}};
  case Prim::Dropout:
    return {"dropout", {{"p", true}}};
  case Prim::Conv2d:
    return {"conv2d", {{"in", true}, {"out", true}, {"kernel", true}, {"stride", false}, {"padding", false}, {"bias", false}}};
  case Prim::BatchNorm:
    return {"batchnorm", {{"c", true}, {"eps", false}, {"momentum", false}}};
  case Prim::MaxPool:
    return {"maxpool", {{"kernel", true}, {"stride", false}, {"padding", false}}};
  case Prim::AvgPool:
    return {"avgpool", {}};
  case Prim::Shortcut:
    return {"shortcut", {{"in", true}, {"out", true}, {"stride", false}}};
  }
  return {};
}

Prim primOf(const std::string &n) {
  if (n == "embedding")
    return Prim::Embedding;
  if (n == "linear")
    return Prim::Linear;
  if (n == "layernorm")
    return Prim::LayerNorm;
  if (n == "rmsnorm")
    return Prim::RMSNorm;
  if (n == "attention")
    return Prim::Attention;
  if (n == "conv2d")
    return Prim::Conv2d;
  if (n == "batchnorm")
    return Prim::BatchNorm;
  if (n == "maxpool")
    return Prim::MaxPool;
  if (n == "avgpool")
    return Prim::AvgPool;
  if (n == "shortcut")
    return Prim::Shortcut;
  return Prim::Dropout;
}

/// A bound primitive layer: its configuration and its parameters.
struct Layer {
  Prim prim;
  std::string path;
  ast::Loc loc;
  std::vector<int> params;
  int64_t rows = 0, cols = 0; ///< embedding (n, d); linear (i, o); norms/attention (d, d); conv2d (in, out)
  bool defaultDims = false;   ///< the logical dims were not written
  int64_t heads = 0, kvHeads = 0;
  bool causal = true, rope = false;
  double eps = 0, p = 0, ropeTheta = 10000.0;
  double momentum = 0;                     ///< batchnorm
  int64_t kernel = 0, stride = 1, pad = 0; ///< conv2d, maxpool
};

struct BlockInst;
struct Binding {
  enum class Kind { Layer, Block, Repeat } kind;
  Layer layer;
  std::shared_ptr<BlockInst> block;
  std::vector<std::shared_ptr<BlockInst>> repeat;
  int64_t firstLayer = -1; ///< a trunk repeat's first layer index
  bool firstDiffers = false; ///< `first:` gave unit 0 its own block, which may change the type
  ast::Loc loc;
};

struct BlockInst {
  const ast::Decl *decl = nullptr;
  Env env;
  std::string prefix;
  std::map<std::string, Binding> bindings;
  std::vector<bool> isBinding; ///< per body statement
};

} // namespace

namespace plan::lang {

class Instantiator {
public:
  Instantiator(Sema &sema, sema::Model &model) : sema(sema), diags(sema.diags), model(model) {}

  bool failed = false;

  std::shared_ptr<BlockInst> bind(const ast::Decl &decl, const Value &call, const std::string &prefix) {
    if (stack.size() >= kMaxBlockDepth || std::find(stack.begin(), stack.end(), decl.name) != stack.end()) {
      auto d = diags.error(call.loc, "'" + decl.name + "' instantiates itself");
      d.note(decl.nameLoc, "'" + decl.name + "' is declared here");
      failed = true;
      return nullptr;
    }
    bool nested = !stack.empty();
    if (nested)
      diags.pushContext(call.loc, "in '" + decl.name + "', instantiated here");
    auto env = bindParams(decl, call);
    if (!env) {
      if (nested)
        diags.popContext();
      failed = true;
      return nullptr;
    }
    if (nested) {
      // Name the argument values, which is what makes one instance differ from another.
      std::string values;
      for (const ast::Param &p : decl.params) {
        const Value &v = (*env)[p.name];
        std::string shown = v.kind == Value::Kind::Int      ? std::to_string(v.i)
                            : v.kind == Value::Kind::Bool   ? (v.b ? "true" : "false")
                            : v.kind == Value::Kind::String ? "\"" + v.s + "\""
                            : v.kind == Value::Kind::Float  ? llvm::formatv("{0:g}", v.f).str()
                                                            : "…";
        values += (values.empty() ? "" : ", ") + p.name + " = " + shown;
      }
      diags.popContext();
      diags.pushContext(call.loc,
                        "in '" + decl.name + "'" + (values.empty() ? "" : " (" + values + ")") + ", instantiated here");
    }
    stack.push_back(decl.name);
    auto inst = std::make_shared<BlockInst>();
    inst->decl = &decl;
    inst->env = std::move(*env);
    inst->prefix = prefix;
    std::set<std::string> defined;
    for (auto &in : decl.inputs)
      defined.insert(in.first);
    for (const ast::Stmt &s : decl.body) {
      bool binding = s.kind == ast::Stmt::Kind::Assign && isLayerBinding(sema.decls, *s.value, defined);
      inst->isBinding.push_back(binding);
      if (s.kind == ast::Stmt::Kind::Assign)
        defined.insert(s.name);
      if (!binding || failed)
        continue;
      if (inst->bindings.count(s.name)) {
        diags.error(s.loc, "layer '" + s.name + "' is already bound")
            .note(inst->bindings[s.name].loc, "first bound here");
        failed = true;
        continue;
      }
      if (inst->env.count(s.name)) {
        diags.error(s.loc, "'" + s.name + "' is a parameter of '" + decl.name + "'; a layer needs another name");
        failed = true;
        continue;
      }
      makeBinding(*inst, s);
    }
    stack.pop_back();
    if (nested)
      diags.popContext();
    return failed ? nullptr : inst;
  }

  /// Applies an instantiated block to input values; returns the result value id.
  int apply(BlockInst &inst, const std::vector<int> &inputs, ast::Loc callLoc) {
    const ast::Decl &decl = *inst.decl;
    if (inputs.size() != decl.inputs.size()) {
      diags
          .error(callLoc, "'" + decl.name + "' takes " + std::to_string(decl.inputs.size()) + " input" +
                              (decl.inputs.size() == 1 ? "" : "s") + ", not " + std::to_string(inputs.size()))
          .note(decl.nameLoc, "'" + decl.name + "' is declared here");
      failed = true;
      return -1;
    }
    std::map<std::string, int> scope;
    for (size_t i = 0; i < inputs.size(); ++i)
      scope[decl.inputs[i].first] = inputs[i];
    bool nested = decl.kind == ast::Decl::Kind::Block;
    if (nested)
      diags.pushContext(callLoc, "in '" + decl.name + "', applied here");
    struct Pop {
      Diags &d;
      bool on;
      ~Pop() {
        if (on)
          d.popContext();
      }
    } pop{diags, nested};
    for (size_t i = 0; i < decl.body.size() && !failed; ++i) {
      const ast::Stmt &s = decl.body[i];
      if (inst.isBinding[i])
        continue;
      int v = flow(*s.value, inst, scope);
      if (v < 0) {
        failed = true;
        return -1;
      }
      if (s.kind == ast::Stmt::Kind::Return)
        return v;
      if (inst.bindings.count(s.name)) {
        diags.error(s.loc, "'" + s.name + "' is a layer and cannot be assigned a tensor")
            .note(inst.bindings[s.name].loc, "bound here");
        failed = true;
        return -1;
      }
      scope[s.name] = v;
    }
    if (!failed)
      diags.error(decl.bodyEnd, "'" + decl.name + "' does not return a value");
    failed = true;
    return -1;
  }

  int64_t repeatCount = 0; ///< units of the trunk's repeats

private:
  Sema &sema;
  Diags &diags;
  sema::Model &model;
  std::vector<std::string> stack;
  int currentLayer = -1;
  int repeatDepth = 0;  ///< repeat bindings being bound around the current one
  int64_t elements = 0; ///< parameter elements so far

  ValueType typeOf(int v) const {
    if (v == sema::kTokensValue && model.images)
      return {ValueType::Kind::Images, 0};
    if (v == sema::kTargetsValue && model.images)
      return {ValueType::Kind::Labels, 0};
    if (v < sema::kFirstOpValue)
      return {ValueType::Kind::Tokens, 0};
    return model.ops[v - sema::kFirstOpValue].result;
  }

  std::optional<Env> bindParams(const ast::Decl &decl, const Value &call) {
    Signature sig;
    sig.name = decl.name;
    for (const ast::Param &p : decl.params)
      sig.params.push_back({p.name, !p.defaultValue});
    auto args = bindArgs(sema, sig, call);
    if (!args)
      return std::nullopt;
    Env env;
    for (const ast::Param &p : decl.params) {
      Value v;
      auto it = args->find(p.name);
      if (it != args->end()) {
        v = it->second;
      } else {
        v = sema.eval(*p.defaultValue, &env);
        if (v.isError())
          return std::nullopt;
      }
      std::string what = "argument '" + p.name + "' of '" + decl.name + "'";
      bool ok = true;
      if (p.type == "int") {
        ok = sema.toInt(v, what).has_value();
      } else if (p.type == "float") {
        ok = sema.toFloat(v, what).has_value();
        v.kind = Value::Kind::Float;
      } else if (p.type == "bool") {
        ok = sema.toBool(v, what).has_value();
      } else if (p.type == "string") {
        ok = sema.toString(v, what).has_value();
      } else {
        ok = false; // reported by checkBodyNames
      }
      if (!ok)
        return std::nullopt;
      env[p.name] = v;
    }
    return env;
  }

  int addParam(const std::string &path, std::vector<int64_t> shape, std::vector<std::string> dims, sema::Init init,
               ast::Loc loc) {
    if (model.params.size() >= kMaxParams) {
      if (!failed)
        diags.error(loc,
                    "model '" + model.name + "' has more than " + std::to_string(kMaxParams) + " parameter tensors");
      failed = true;
      return -1;
    }
    int64_t n = 1;
    bool overflow = false;
    for (int64_t s : shape)
      overflow |= __builtin_mul_overflow(n, s, &n);
    if (overflow || __builtin_add_overflow(elements, n, &elements) || elements > kMaxElements) {
      diags.error(loc, "model '" + model.name + "' has more than 2^53 parameter elements (at '" + path + "')");
      failed = true;
      return -1;
    }
    sema::Parameter p;
    p.path = path;
    p.shape = std::move(shape);
    p.dims = std::move(dims);
    p.init = init;
    p.loc = loc;
    model.params.push_back(std::move(p));
    return int(model.params.size() - 1);
  }

  std::optional<std::vector<std::string>> dimsArg(std::map<std::string, Value> &args, std::vector<std::string> dflt,
                                                  const std::string &what) {
    auto it = args.find("dims");
    if (it == args.end())
      return dflt;
    auto names = sema.toNameList(it->second, "'dims' of " + what);
    if (!names)
      return std::nullopt;
    if (names->size() != dflt.size()) {
      diags.error(it->second.loc, "'dims' of " + what + " names " + std::to_string(dflt.size()) +
                                      " logical dims, not " + std::to_string(names->size()));
      return std::nullopt;
    }
    std::vector<std::string> out;
    for (auto &n : *names)
      out.push_back(n.first);
    return out;
  }

  void makeBinding(BlockInst &inst, const ast::Stmt &s) {
    const Expr &e = *s.value;
    std::string path = inst.prefix + s.name;
    Binding b;
    b.loc = s.loc;
    if (e.kind == Expr::Kind::Repeat) {
      b.kind = Binding::Kind::Repeat;
      Value count = sema.eval(*e.lhs, &inst.env);
      auto n = sema.toPositiveInt(count, "the repeat count");
      const ast::Decl *d = sema.decls.lookup(e.text);
      if (!n || !d || d->kind != ast::Decl::Kind::Block) {
        if (n && (!d || d->kind != ast::Decl::Kind::Block))
          unknownBlock(e.text, e.unitLoc);
        failed = true;
        return;
      }
      Value call = callValue(e, inst.env);
      if (call.isError()) {
        failed = true;
        return;
      }
      if (*n > int64_t(kMaxOps)) {
        diags.error(e.lhs->loc, "repeat count " + std::to_string(*n) + " is larger than a model can be (" +
                                    std::to_string(kMaxOps) + " operations)");
        failed = true;
        return;
      }
      // The outermost repeat (at any block depth) is the trunk pipeline stages split;
      // its units are layers firstLayer … firstLayer + n − 1, wherever it is applied.
      if (repeatDepth == 0) {
        b.firstLayer = repeatCount;
        repeatCount += *n;
      }
      // `first: block(…)`: unit 0 is that block's instance (checked by checkBodyNames).
      const ast::Decl *firstDecl = nullptr;
      Value firstCall;
      if (e.first) {
        const Expr &f = *e.first;
        firstDecl = f.kind == Expr::Kind::Call && f.lhs->kind == Expr::Kind::Name ? sema.decls.lookup(f.lhs->text)
                                                                                  : nullptr;
        if (!firstDecl || firstDecl->kind != ast::Decl::Kind::Block) {
          diags.error(f.loc, "'first:' of a repeat takes a block's instance, as in 'first: block(64, 128)'");
          failed = true;
          return;
        }
        firstCall = callValue(f, inst.env);
        if (firstCall.isError()) {
          failed = true;
          return;
        }
        b.firstDiffers = true;
      }
      ++repeatDepth;
      for (int64_t i = 0; i < *n && !failed; ++i) {
        bool first = i == 0 && firstDecl;
        auto child = bind(first ? *firstDecl : *d, first ? firstCall : call, path + "." + std::to_string(i) + ".");
        if (child)
          b.repeat.push_back(child);
      }
      --repeatDepth;
    } else {
      const std::string &callee = e.lhs->text;
      Value call = callValue(e, inst.env);
      if (call.isError()) {
        failed = true;
        return;
      }
      if (isLayerName(callee)) {
        b.kind = Binding::Kind::Layer;
        if (!makeLayer(b.layer, primOf(callee), call, path, s.loc))
          failed = true;
      } else {
        b.kind = Binding::Kind::Block;
        b.block = bind(*sema.decls.lookup(callee), call, path + ".");
      }
    }
    if (!failed)
      inst.bindings[s.name] = std::move(b);
  }

  /// The arguments of a layer or block constructor (`linear(…)`, `repeat(n) b(…)`),
  /// evaluated against the enclosing parameters. `dims:` names logical dims, so
  /// its names are taken literally rather than looked up.
  Value callValue(const Expr &e, const Env &env) {
    Value call;
    call.kind = Value::Kind::Call;
    bool repeat = e.kind == Expr::Kind::Repeat;
    call.s = repeat ? e.text : e.lhs->text;
    call.loc = repeat ? e.unitLoc : e.loc;
    for (const ast::Arg &a : e.args) {
      Value::Item item;
      item.key = a.key;
      item.keyLoc = a.keyLoc;
      item.value = std::make_shared<Value>(sema.eval(*a.value, a.key == "dims" ? nullptr : &env));
      if (item.value->kind == Value::Kind::Name && a.key != "dims") {
        // Constructor arguments are constants; a bare name must be a parameter.
        std::vector<std::string> names;
        for (auto &kv : env)
          names.push_back(kv.first);
        std::string best = closestMatch(item.value->s, names);
        diags.error(item.value->loc,
                    "unknown name '" + item.value->s + "'" + (best.empty() ? "" : "; did you mean '" + best + "'?"));
        return Value::error();
      }
      if (item.value->isError())
        return Value::error();
      call.items.push_back(std::move(item));
    }
    return call;
  }

  void unknownBlock(const std::string &name, ast::Loc loc) {
    std::vector<std::string> names =
        sema.decls.names([](const ast::Decl &d) { return d.kind == ast::Decl::Kind::Block; });
    std::string best = closestMatch(name, names);
    diags.error(loc, "unknown block '" + name + "'" + (best.empty() ? "" : "; did you mean '" + best + "'?"));
  }

  bool positive(const Value &v, const std::string &what, int64_t &out) {
    auto i = sema.toPositiveInt(v, what);
    if (!i)
      return false;
    out = *i;
    return true;
  }

  bool makeLayer(Layer &l, Prim prim, const Value &call, const std::string &path, ast::Loc loc) {
    Signature sig = layerSignature(prim);
    auto argsOpt = bindArgs(sema, sig, call);
    if (!argsOpt)
      return false;
    auto &args = *argsOpt;
    std::string what = "'" + sig.name + "' ('" + path + "')";
    auto boolArg = [&](const char *key, bool dflt, bool &out) {
      auto it = args.find(key);
      if (it == args.end()) {
        out = dflt;
        return true;
      }
      auto b = sema.toBool(it->second, std::string("'") + key + "' of " + what);
      if (b)
        out = *b;
      return b.has_value();
    };
    auto floatArg = [&](const char *key, double dflt, double &out) {
      auto it = args.find(key);
      if (it == args.end()) {
        out = dflt;
        return true;
      }
      auto f = sema.toFloat(it->second, std::string("'") + key + "' of " + what);
      if (f)
        out = *f;
      return f.has_value();
    };
    l.prim = prim;
    l.path = path;
    l.loc = loc;
    using sema::Init;
    switch (prim) {
    case Prim::Embedding: {
      if (!positive(args["n"], "the rows of " + what, l.rows) || !positive(args["d"], "the width of " + what, l.cols))
        return false;
      auto dims = dimsArg(args, {"vocab", "embed"}, what);
      if (!dims)
        return false;
      l.defaultDims = !args.count("dims");
      l.params.push_back(addParam(path + ".weight", {l.rows, l.cols}, *dims, Init::Normal, loc));
      break;
    }
    case Prim::Linear: {
      bool bias;
      if (!positive(args["i"], "the input features of " + what, l.rows) ||
          !positive(args["o"], "the output features of " + what, l.cols) || !boolArg("bias", true, bias))
        return false;
      auto dims = dimsArg(args, {"embed", "mlp"}, what);
      if (!dims)
        return false;
      l.params.push_back(addParam(path + ".weight", {l.rows, l.cols}, *dims, Init::Normal, loc));
      if (bias)
        l.params.push_back(addParam(path + ".bias", {l.cols}, {(*dims)[1]}, Init::Zeros, loc));
      break;
    }
    case Prim::LayerNorm:
    case Prim::RMSNorm: {
      bool bias = false;
      if (!positive(args["d"], "the width of " + what, l.rows) ||
          !floatArg("eps", prim == Prim::LayerNorm ? 1e-5 : 1e-6, l.eps) ||
          (prim == Prim::LayerNorm && !boolArg("bias", true, bias)))
        return false;
      if (!(l.eps > 0)) {
        diags.error(args["eps"].loc, "'eps' of " + what + " must be positive");
        return false;
      }
      l.cols = l.rows;
      l.params.push_back(addParam(path + ".weight", {l.rows}, {"embed"}, Init::Ones, loc));
      if (bias)
        l.params.push_back(addParam(path + ".bias", {l.rows}, {"embed"}, Init::Zeros, loc));
      break;
    }
    case Prim::Attention: {
      bool bias;
      if (!positive(args["d"], "the width of " + what, l.rows) ||
          !positive(args["heads"], "the heads of " + what, l.heads) || !boolArg("causal", true, l.causal) ||
          !boolArg("rope", false, l.rope) || !boolArg("bias", true, bias) ||
          !floatArg("rope_theta", 10000.0, l.ropeTheta))
        return false;
      l.kvHeads = l.heads;
      if (args.count("kv_heads") && !positive(args["kv_heads"], "kv_heads of " + what, l.kvHeads))
        return false;
      l.cols = l.rows;
      if (!(l.ropeTheta > 0)) {
        diags.error(args["rope_theta"].loc, "'rope_theta' of " + what + " must be positive");
        return false;
      }
      if (l.rows % l.heads != 0) {
        diags.error(args["heads"].loc, "the width " + std::to_string(l.rows) + " of " + what +
                                           " is not divisible by its " + std::to_string(l.heads) + " heads");
        return false;
      }
      if (l.heads % l.kvHeads != 0) {
        diags.error(args.count("kv_heads") ? args["kv_heads"].loc : loc,
                    "the " + std::to_string(l.heads) + " heads of " + what + " are not divisible by its " +
                        std::to_string(l.kvHeads) + " kv_heads");
        return false;
      }
      int64_t headDim = l.rows / l.heads;
      if (l.rope && headDim % 2 != 0) {
        diags.error(loc, "rope needs an even head dimension; " + what + " has " + std::to_string(headDim));
        return false;
      }
      int64_t qkv;
      if (__builtin_mul_overflow(l.heads + 2 * l.kvHeads, headDim, &qkv)) {
        diags.error(loc, "the attention " + what + " is too large");
        return false;
      }
      l.params.push_back(addParam(path + ".c_attn.weight", {l.rows, qkv}, {"embed", "qkv"}, Init::Normal, loc));
      if (bias)
        l.params.push_back(addParam(path + ".c_attn.bias", {qkv}, {"qkv"}, Init::Zeros, loc));
      l.params.push_back(addParam(path + ".c_proj.weight", {l.rows, l.rows}, {"heads", "embed"}, Init::Normal, loc));
      if (bias)
        l.params.push_back(addParam(path + ".c_proj.bias", {l.rows}, {"embed"}, Init::Zeros, loc));
      break;
    }
    case Prim::Dropout: {
      if (!floatArg("p", 0, l.p))
        return false;
      if (l.p < 0 || l.p >= 1) {
        diags.error(args["p"].loc, "dropout probability must be in [0, 1), not " + std::to_string(l.p));
        return false;
      }
      break;
    }
    case Prim::Conv2d:
    case Prim::BatchNorm:
    case Prim::MaxPool:
    case Prim::AvgPool:
    case Prim::Shortcut:
      if (!makeVisionLayer(l, args, what, loc, boolArg, floatArg))
        return false;
      break;
    }
    for (int p : l.params)
      if (p < 0)
        return false;
    return true;
  }

  /// A window's size, stride and padding (conv2d, maxpool): padding at most half the
  /// window, as PyTorch requires.
  bool windowArgs(Layer &l, std::map<std::string, Value> &args, const std::string &what) {
    if (!positive(args["kernel"], "the kernel size of " + what, l.kernel))
      return false;
    l.stride = l.prim == Prim::MaxPool ? l.kernel : 1; // PyTorch's defaults
    if (args.count("stride") && !positive(args["stride"], "the stride of " + what, l.stride))
      return false;
    l.pad = 0;
    if (auto it = args.find("padding"); it != args.end()) {
      auto p = sema.toInt(it->second, "the padding of " + what);
      if (!p)
        return false;
      if (*p < 0 || 2 * *p > l.kernel) {
        diags.error(it->second.loc, "the padding of " + what + " must be between 0 and half the kernel (" +
                                        std::to_string(l.kernel / 2) + "), not " + std::to_string(*p));
        return false;
      }
      l.pad = *p;
    }
    return true;
  }

  /// conv2d (weight [out, in, k, k] and a bias, PyTorch's names and He's initialisation
  /// for ReLU networks), batchnorm (weight and bias), maxpool and avgpool (none).
  template <typename BoolArg, typename FloatArg>
  bool makeVisionLayer(Layer &l, std::map<std::string, Value> &args, const std::string &what, ast::Loc loc,
                       BoolArg &boolArg, FloatArg &floatArg) {
    using sema::Init;
    switch (l.prim) {
    case Prim::Conv2d: {
      bool bias;
      if (!positive(args["in"], "the input channels of " + what, l.rows) ||
          !positive(args["out"], "the output channels of " + what, l.cols) || !windowArgs(l, args, what) ||
          !boolArg("bias", true, bias))
        return false;
      int w = addParam(l.path + ".weight", {l.cols, l.rows, l.kernel, l.kernel}, {"out", "in", "kh", "kw"},
                       Init::Normal, loc);
      if (w >= 0) // fan-out mode, as torchvision's ResNets
        model.params[w].initStd = std::sqrt(2.0 / double(l.cols * l.kernel * l.kernel));
      l.params.push_back(w);
      if (bias)
        l.params.push_back(addParam(l.path + ".bias", {l.cols}, {"out"}, Init::Zeros, loc));
      return true;
    }
    case Prim::BatchNorm:
      if (!positive(args["c"], "the channels of " + what, l.rows) || !floatArg("eps", 1e-5, l.eps) ||
          !floatArg("momentum", 0.1, l.momentum))
        return false;
      if (!(l.eps > 0) || !(l.momentum >= 0 && l.momentum <= 1)) {
        diags.error(loc, "'eps' of " + what + " must be positive and its 'momentum' in [0, 1]");
        return false;
      }
      l.cols = l.rows;
      l.params.push_back(addParam(l.path + ".weight", {l.rows}, {"channels"}, Init::Ones, loc));
      l.params.push_back(addParam(l.path + ".bias", {l.rows}, {"channels"}, Init::Zeros, loc));
      return true;
    case Prim::MaxPool:
      return windowArgs(l, args, what);
    case Prim::Shortcut:
      return makeShortcut(l, args, what, loc);
    default:
      return true;
    }
  }

  /// shortcut(in, out, stride: 1): a residual block's shortcut, as torchvision's
  /// `downsample`: the identity where the block keeps the channels and the size, else a
  /// 1×1 convolution of that stride (`.0.weight`, no bias) and a batchnorm (`.1.weight`,
  /// `.1.bias`).
  bool makeShortcut(Layer &l, std::map<std::string, Value> &args, const std::string &what, ast::Loc loc) {
    using sema::Init;
    if (!positive(args["in"], "the input channels of " + what, l.rows) ||
        !positive(args["out"], "the output channels of " + what, l.cols) ||
        (args.count("stride") && !positive(args["stride"], "the stride of " + what, l.stride)))
      return false;
    l.kernel = 1, l.pad = 0, l.eps = 1e-5, l.momentum = 0.1;
    if (l.rows == l.cols && l.stride == 1)
      return true;
    int w = addParam(l.path + ".0.weight", {l.cols, l.rows, 1, 1}, {"out", "in", "kh", "kw"}, Init::Normal, loc);
    if (w >= 0)
      model.params[w].initStd = std::sqrt(2.0 / double(l.cols));
    l.params.push_back(w);
    l.params.push_back(addParam(l.path + ".1.weight", {l.cols}, {"channels"}, Init::Ones, loc));
    l.params.push_back(addParam(l.path + ".1.bias", {l.cols}, {"channels"}, Init::Zeros, loc));
    return true;
  }

  int addOp(GraphOp op) {
    if (model.ops.size() >= kMaxOps) {
      if (!failed)
        diags.error(op.loc, "model '" + model.name + "' has more than " + std::to_string(kMaxOps) + " operations");
      failed = true;
      return -1;
    }
    op.layerIndex = currentLayer;
    model.ops.push_back(std::move(op));
    return int(model.ops.size() - 1) + sema::kFirstOpValue;
  }

  bool expectType(int v, ValueType want, ast::Loc loc, const std::string &what) {
    ValueType got = typeOf(v);
    if (got == want)
      return true;
    diags.error(loc, what + " expects " + want.str() + ", but its input is " + got.str());
    return false;
  }

  int applyLayer(const Layer &l, const std::vector<int> &in, ast::Loc loc) {
    std::string what = "'" + l.path + "'";
    if (in.size() != 1) {
      diags.error(loc, what + " takes one input, not " + std::to_string(in.size()));
      return -1;
    }
    GraphOp op;
    op.layer = l.path;
    op.operands = in;
    op.params = l.params;
    op.loc = loc;
    op.bindingLoc = l.loc;
    op.inFeatures = l.rows;
    op.outFeatures = l.cols;
    ValueType hidden{ValueType::Kind::Hidden, l.rows};
    switch (l.prim) {
    case Prim::Embedding: {
      ValueType t = typeOf(in[0]);
      if (t.kind != ValueType::Kind::Tokens && t.kind != ValueType::Kind::Positions) {
        diags.error(loc, "embedding " + what + " expects token ids or positions, but its input is " + t.str());
        return -1;
      }
      op.kind = OpKind::Embedding;
      op.result = {ValueType::Kind::Hidden, l.cols};
      if (t.kind == ValueType::Kind::Positions) {
        model.maxSeq = model.maxSeq ? std::min(model.maxSeq, l.rows) : l.rows;
        // A table indexed by position is not a vocabulary: never split it as one.
        if (l.defaultDims)
          model.params[l.params[0]].dims[0] = "context";
      } else if (in[0] == sema::kTokensValue)
        model.vocab = l.rows;
      return addOp(op);
    }
    case Prim::Linear:
      // A flatten of images whose size the data gives is checked when it is known.
      if (!(typeOf(in[0]) == ValueType{ValueType::Kind::Hidden, 0}) && !expectType(in[0], hidden, loc, "linear " + what))
        return -1;
      op.kind = OpKind::Linear;
      op.result = {ValueType::Kind::Hidden, l.cols};
      return addOp(op);
    case Prim::LayerNorm:
    case Prim::RMSNorm:
      if (!expectType(in[0], hidden, loc, what))
        return -1;
      op.kind = l.prim == Prim::LayerNorm ? OpKind::LayerNorm : OpKind::RMSNorm;
      op.eps = l.eps;
      op.result = hidden;
      return addOp(op);
    case Prim::Attention:
      if (!expectType(in[0], hidden, loc, "attention " + what))
        return -1;
      op.kind = OpKind::Attention;
      op.heads = l.heads;
      op.kvHeads = l.kvHeads;
      op.causal = l.causal;
      op.rope = l.rope;
      op.ropeTheta = l.ropeTheta;
      op.result = hidden;
      return addOp(op);
    case Prim::Conv2d:
    case Prim::BatchNorm:
    case Prim::MaxPool:
    case Prim::AvgPool:
      return applyVisionLayer(l, op, loc);
    case Prim::Shortcut:
      return applyShortcut(l, op, loc);
    case Prim::Dropout: {
      ValueType t = typeOf(in[0]);
      if (t.kind != ValueType::Kind::Hidden) {
        diags.error(loc, "dropout " + what + " expects activations, but its input is " + t.str());
        return -1;
      }
      op.kind = OpKind::Dropout;
      op.p = l.p;
      op.result = t;
      return addOp(op);
    }
    }
    return -1;
  }

  /// conv2d, batchnorm, maxpool, avgpool on images, their channels checked (a model's
  /// input images have those of the first layer that reads them).
  int applyVisionLayer(const Layer &l, GraphOp &op, ast::Loc loc) {
    std::string what = "'" + l.path + "'";
    ValueType t = typeOf(op.operands[0]);
    const char *name = l.prim == Prim::Conv2d      ? "conv2d"
                       : l.prim == Prim::BatchNorm ? "batchnorm"
                       : l.prim == Prim::MaxPool   ? "maxpool"
                                                   : "avgpool";
    if (t.kind != ValueType::Kind::Images) {
      diags.error(loc, std::string(name) + " " + what +
                           " expects images [batch, channels, height, width], but its input is " + t.str());
      return -1;
    }
    bool channelsChecked = l.prim == Prim::Conv2d || l.prim == Prim::BatchNorm;
    if (channelsChecked && t.features != 0 && t.features != l.rows) {
      diags.error(loc, std::string(name) + " " + what + " takes " + std::to_string(l.rows) +
                           " channels, but its input has " + std::to_string(t.features));
      return -1;
    }
    op.kernel = l.kernel;
    op.stride = l.stride;
    op.pad = l.pad;
    op.eps = l.eps;
    op.momentum = l.momentum;
    op.result = {ValueType::Kind::Images, channelsChecked ? l.cols : t.features, false};
    switch (l.prim) {
    case Prim::Conv2d:
      op.kind = OpKind::Conv2d;
      break;
    case Prim::BatchNorm:
      op.kind = OpKind::BatchNorm;
      op.result.pooled = t.pooled;
      break;
    case Prim::MaxPool:
      op.kind = OpKind::MaxPool;
      break;
    default:
      op.kind = OpKind::AvgPool;
      op.result.pooled = true;
      break;
    }
    return addOp(op);
  }

  /// A shortcut: its input itself, or its convolution then its batchnorm.
  int applyShortcut(const Layer &l, GraphOp &op, ast::Loc loc) {
    ValueType t = typeOf(op.operands[0]);
    if (t.kind != ValueType::Kind::Images || (t.features != 0 && t.features != l.rows)) {
      diags.error(loc, "shortcut '" + l.path + "' takes images of " + std::to_string(l.rows) +
                           " channels, but its input is " + t.str());
      return -1;
    }
    if (l.params.empty())
      return op.operands[0];
    GraphOp conv = op, bn = op;
    conv.kind = OpKind::Conv2d;
    conv.layer = l.path + ".0";
    conv.params = {l.params[0]};
    conv.kernel = 1, conv.stride = l.stride, conv.pad = 0;
    conv.result = {ValueType::Kind::Images, l.cols, false};
    int x = addOp(conv);
    if (x < 0)
      return -1;
    bn.kind = OpKind::BatchNorm;
    bn.layer = l.path + ".1";
    bn.operands = {x};
    bn.params = {l.params[1], l.params[2]};
    bn.inFeatures = bn.outFeatures = l.cols;
    bn.eps = l.eps, bn.momentum = l.momentum;
    bn.result = conv.result;
    return addOp(bn);
  }

  std::vector<std::string> scopeNames(const BlockInst &inst, const std::map<std::string, int> &scope) {
    std::vector<std::string> names;
    for (auto &kv : scope)
      names.push_back(kv.first);
    for (auto &kv : inst.bindings)
      names.push_back(kv.first);
    for (auto &kv : inst.env)
      names.push_back(kv.first);
    for (auto &n : functionNames())
      names.push_back(n);
    for (auto &n : layerNames())
      names.push_back(n);
    for (auto &n : sema.decls.names([](const ast::Decl &d) { return d.kind == ast::Decl::Kind::Block; }))
      names.push_back(n);
    return names;
  }

  int flowArgs(const Expr &call, BlockInst &inst, std::map<std::string, int> &scope, std::vector<int> &out) {
    for (const ast::Arg &a : call.args) {
      if (!a.key.empty()) {
        diags.error(a.keyLoc, "tensor inputs are positional; remove '" + a.key + ":'");
        return -1;
      }
      int v = flow(*a.value, inst, scope);
      if (v < 0)
        return -1;
      out.push_back(v);
    }
    return 0;
  }

  /// Evaluates a tensor expression; returns a value id, or -1 after an error.
  int flow(const Expr &e, BlockInst &inst, std::map<std::string, int> &scope) {
    switch (e.kind) {
    case Expr::Kind::Name: {
      auto it = scope.find(e.text);
      if (it != scope.end())
        return it->second;
      if (inst.bindings.count(e.text)) {
        diags.error(e.loc, "'" + e.text + "' is a layer; apply it to a tensor, as in '" + e.text + "(x)'");
        return -1;
      }
      if (inst.env.count(e.text)) {
        diags.error(e.loc, "'" + e.text + "' is a constant, not a tensor");
        return -1;
      }
      unknownName(e.text, e.loc, scopeNames(inst, scope));
      return -1;
    }
    case Expr::Kind::Call: {
      std::vector<int> in;
      if (e.lhs->kind == Expr::Kind::Member) {
        const Expr &m = *e.lhs;
        if (m.lhs->kind != Expr::Kind::Name || !inst.bindings.count(m.lhs->text) ||
            inst.bindings[m.lhs->text].kind != Binding::Kind::Layer ||
            inst.bindings[m.lhs->text].layer.prim != Prim::Embedding || m.text != "attend") {
          diags.error(m.loc, "'." + m.text +
                                 "' is not a method here; the only method is "
                                 "'.attend' of an embedding layer");
          return -1;
        }
        if (flowArgs(e, inst, scope, in) < 0)
          return -1;
        const Layer &l = inst.bindings[m.lhs->text].layer;
        if (in.size() != 1) {
          diags.error(e.loc, "'.attend' takes one input");
          return -1;
        }
        if (!expectType(in[0], {ValueType::Kind::Hidden, l.cols}, e.loc, "'" + l.path + ".attend'"))
          return -1;
        GraphOp op;
        op.kind = OpKind::Attend;
        op.layer = l.path;
        op.operands = in;
        op.params = {l.params[0]};
        op.result = {ValueType::Kind::Hidden, l.rows};
        op.loc = e.loc;
        op.bindingLoc = l.loc;
        op.inFeatures = l.cols;
        op.outFeatures = l.rows;
        return addOp(op);
      }
      if (e.lhs->kind != Expr::Kind::Name) {
        diags.error(e.loc, "a layer must be bound to a name before it is applied");
        return -1;
      }
      const std::string &callee = e.lhs->text;
      if (scope.count(callee)) {
        diags.error(e.lhs->loc, "'" + callee + "' is a tensor, not a layer");
        return -1;
      }
      auto b = inst.bindings.find(callee);
      if (b != inst.bindings.end()) {
        if (flowArgs(e, inst, scope, in) < 0)
          return -1;
        return applyBinding(b->second, in, e.loc, inst);
      }
      if (isFunctionName(callee)) {
        if (flowArgs(e, inst, scope, in) < 0)
          return -1;
        return applyFunction(callee, in, e.loc);
      }
      if (isLayerName(callee) || sema.decls.lookup(callee)) {
        diags.error(e.loc, "'" + callee +
                               "(…)' makes a layer: bind it to a name first, as in "
                               "'proj = " +
                               callee + "(…)', then apply 'proj(x)'");
        return -1;
      }
      unknownName(callee, e.lhs->loc, scopeNames(inst, scope));
      return -1;
    }
    case Expr::Kind::Binary: {
      if (e.text != "+" && e.text != "-" && e.text != "*") {
        diags.error(e.loc, "'" + e.text + "' is not an operation on tensors; use +, - or *");
        return -1;
      }
      int a = flow(*e.lhs, inst, scope);
      if (a < 0)
        return -1;
      int b = flow(*e.rhs, inst, scope);
      if (b < 0)
        return -1;
      ValueType ta = typeOf(a), tb = typeOf(b);
      if (!(ta == tb) || (ta.kind != ValueType::Kind::Hidden && ta.kind != ValueType::Kind::Images)) {
        diags.error(e.loc, "cannot apply '" + e.text + "' to " + ta.str() + " and " + tb.str());
        return -1;
      }
      GraphOp op;
      op.kind = e.text == "+" ? OpKind::Add : e.text == "-" ? OpKind::Sub : OpKind::Mul;
      op.operands = {a, b};
      op.result = ta;
      op.loc = e.loc;
      return addOp(op);
    }
    case Expr::Kind::Repeat:
      diags.error(e.loc, "'repeat(…)' makes layers: bind it to a name first, then apply it");
      return -1;
    case Expr::Kind::Member:
      diags.error(e.loc, "'." + e.text +
                             "' is not a tensor: parameters are read only by the layer "
                             "that owns them (the one method is '.attend(x)' of an embedding)");
      return -1;
    case Expr::Kind::Unary:
      diags.error(e.loc, "'" + e.text + "' cannot be applied to a tensor; subtract two tensors instead");
      return -1;
    default:
      diags.error(e.loc, "expected a tensor expression; constants cannot be mixed into the "
                         "tensor graph");
      return -1;
    }
  }

  void unknownName(const std::string &name, ast::Loc loc, const std::vector<std::string> &names) {
    std::string best = closestMatch(name, names);
    diags.error(loc, "unknown name '" + name + "'" + (best.empty() ? "" : "; did you mean '" + best + "'?"));
  }

  int applyBinding(Binding &b, const std::vector<int> &in, ast::Loc loc, BlockInst &inst) {
    switch (b.kind) {
    case Binding::Kind::Layer:
      return applyLayer(b.layer, in, loc);
    case Binding::Kind::Block:
      return apply(*b.block, in, loc);
    case Binding::Kind::Repeat: {
      if (in.size() != 1) {
        diags.error(loc, "a repeated block takes one input");
        return -1;
      }
      bool top = currentLayer < 0 && b.firstLayer >= 0; // a trunk repeat, not nested in one
      int x = in[0];
      for (size_t i = 0; i < b.repeat.size(); ++i) {
        if (top)
          currentLayer = int(b.firstLayer + int64_t(i));
        ValueType before = typeOf(x);
        int y = apply(*b.repeat[i], {x}, loc);
        if (y < 0)
          return -1;
        if (!(typeOf(y) == before) && !(i == 0 && b.firstDiffers)) {
          diags.error(loc, "a repeated block must return what it takes: '" + b.repeat[i]->decl->name + "' maps " +
                               before.str() + " to " + typeOf(y).str());
          return -1;
        }
        x = y;
      }
      if (top)
        currentLayer = -1;
      return x;
    }
    }
    return -1;
  }

  int applyFunction(const std::string &fn, const std::vector<int> &in, ast::Loc loc) {
    size_t arity = fn == "cross_entropy" ? 2 : 1;
    if (in.size() != arity) {
      diags.error(loc, "'" + fn + "' takes " + std::to_string(arity) + " input" + (arity == 1 ? "" : "s") + ", not " +
                           std::to_string(in.size()));
      return -1;
    }
    GraphOp op;
    op.operands = in;
    op.loc = loc;
    ValueType t = typeOf(in[0]);
    if (fn == "positions") {
      if (t.kind != ValueType::Kind::Tokens) {
        diags.error(loc, "'positions' expects token ids, but its input is " + t.str());
        return -1;
      }
      op.kind = OpKind::Positions;
      op.result = {ValueType::Kind::Positions, 0};
      return addOp(op);
    }
    if (fn == "flatten") {
      if (t.kind != ValueType::Kind::Images) {
        diags.error(loc, "'flatten' expects images [batch, channels, height, width], but its input is " + t.str());
        return -1;
      }
      // [batch, C·H·W]: known here after a global pooling, else once the data gives H, W.
      op.kind = OpKind::Flatten;
      op.result = {ValueType::Kind::Hidden, t.pooled ? t.features : 0};
      return addOp(op);
    }
    if (fn == "cross_entropy") {
      ValueType u = typeOf(in[1]);
      bool targets = u.kind == (model.images ? ValueType::Kind::Labels : ValueType::Kind::Tokens);
      if (t.kind != ValueType::Kind::Hidden || !targets || t.features == 0) {
        diags.error(loc, "'cross_entropy' expects (logits, targets), but got " + t.str() + " and " + u.str());
        return -1;
      }
      if (model.vocab && t.features != model.vocab) {
        diags.error(loc, "the logits have " + std::to_string(t.features) + " classes but the token embedding has " +
                             std::to_string(model.vocab) + " rows (the vocabulary)");
        return -1;
      }
      if (model.images)
        model.classes = t.features;
      op.kind = OpKind::CrossEntropy;
      op.result = {ValueType::Kind::Scalar, 0};
      return addOp(op);
    }
    if (t.kind != ValueType::Kind::Hidden && t.kind != ValueType::Kind::Images) {
      diags.error(loc, "'" + fn + "' expects activations or images, but its input is " + t.str());
      return -1;
    }
    op.kind = fn == "gelu" ? OpKind::Gelu : fn == "silu" ? OpKind::Silu : OpKind::Relu;
    op.result = t;
    return addOp(op);
  }
};

} // namespace plan::lang

void Sema::checkBodyNames(const ast::Decl &decl) {
  const std::vector<std::string> &types = paramTypeNames();
  std::set<std::string> seen;
  for (const ast::Param &p : decl.params) {
    if (std::find(types.begin(), types.end(), p.type) == types.end()) {
      std::string best = closestMatch(p.type, types);
      diags.error(p.typeLoc, "unknown type '" + p.type + "'" +
                                 (best.empty() ? "; the types are int, float, bool and string"
                                               : "; did you mean '" + best + "'?"));
    }
    if (!seen.insert(p.name).second)
      diags.error(p.loc, "duplicate parameter '" + p.name + "'");
  }
  for (auto &in : decl.inputs)
    if (!seen.insert(in.first).second)
      diags.error(in.second, "duplicate input '" + in.first + "'");
  if (decl.kind == ast::Decl::Kind::Model && !decl.alias && decl.inputs.size() != 2)
    diags.error(decl.nameLoc, "model '" + decl.name +
                                  "' must take two inputs, (tokens, targets) or (images, labels); it takes " +
                                  std::to_string(decl.inputs.size()));
  // Names resolve even in blocks no model instantiates. Layer bindings are
  // declarations, usable anywhere in the body; tensors only after they are assigned.
  std::set<std::string> defined;
  for (const ast::Param &p : decl.params)
    defined.insert(p.name);
  for (auto &in : decl.inputs)
    defined.insert(in.first);
  {
    std::set<std::string> before = defined;
    for (const ast::Stmt &s : decl.body) {
      if (s.kind != ast::Stmt::Kind::Assign)
        continue;
      if (isLayerBinding(decls, *s.value, before))
        defined.insert(s.name);
      before.insert(s.name);
    }
  }
  std::function<void(const Expr &)> names = [&](const Expr &e) {
    auto known = [&](const std::string &n) {
      return defined.count(n) || n == "true" || n == "false" || n == "none" || isLayerName(n) || isFunctionName(n) ||
             decls.lookup(n);
    };
    auto unknown = [&](const std::string &n, ast::Loc at) {
      std::vector<std::string> cands(defined.begin(), defined.end());
      for (auto &x : layerNames())
        cands.push_back(x);
      for (auto &x : functionNames())
        cands.push_back(x);
      for (auto &x : decls.names([](const ast::Decl &d) { return d.kind == ast::Decl::Kind::Block; }))
        cands.push_back(x);
      std::string best = closestMatch(n, cands);
      diags.error(at, "unknown name '" + n + "'" + (best.empty() ? "" : "; did you mean '" + best + "'?"));
    };
    switch (e.kind) {
    case Expr::Kind::Name:
      if (!known(e.text))
        unknown(e.text, e.loc);
      return;
    case Expr::Kind::Call:
      names(*e.lhs);
      for (const ast::Arg &a : e.args)
        if (a.key != "dims")
          names(*a.value);
      return;
    case Expr::Kind::Member:
    case Expr::Kind::Unary:
      names(*e.lhs);
      return;
    case Expr::Kind::Binary:
      names(*e.lhs);
      names(*e.rhs);
      return;
    case Expr::Kind::Repeat: {
      names(*e.lhs);
      const ast::Decl *b = decls.lookup(e.text);
      if (!b || b->kind != ast::Decl::Kind::Block) {
        std::string best =
            closestMatch(e.text, decls.names([](const ast::Decl &d) { return d.kind == ast::Decl::Kind::Block; }));
        diags.error(e.unitLoc,
                    "unknown block '" + e.text + "'" + (best.empty() ? "" : "; did you mean '" + best + "'?"));
      }
      for (const ast::Arg &a : e.args)
        names(*a.value);
      if (e.first && e.firstKey != "first")
        diags.error(e.firstKeyLoc, "repeat takes its count, then 'first: block(…)', not '" + e.firstKey + "'");
      else if (e.first)
        names(*e.first);
      return;
    }
    default:
      return; // numbers, strings, words, lists (logical dims)
    }
  };
  bool returned = false;
  for (const ast::Stmt &s : decl.body) {
    if (returned) {
      diags.error(s.loc, "statement after 'return' is never used");
      break;
    }
    names(*s.value);
    if (s.kind == ast::Stmt::Kind::Return)
      returned = true;
    else
      defined.insert(s.name);
  }
  if (!returned && !decl.alias)
    diags.error(decl.bodyEnd, "'" + decl.name + "' has no 'return'");
}

std::optional<int> Sema::modelIndex(const std::string &name, ast::Loc use) {
  auto it = modelIndices.find(name);
  if (it != modelIndices.end())
    return it->second;
  if (failedModels.count(name))
    return std::nullopt;
  const ast::Decl *decl = decls.lookup(name);
  if (!decl || decl->kind != ast::Decl::Kind::Model) {
    std::vector<std::string> names = decls.names([](const ast::Decl &d) { return d.kind == ast::Decl::Kind::Model; });
    std::string best = closestMatch(name, names);
    auto d = diags.error(use, "unknown model '" + name + "'" + (best.empty() ? "" : "; did you mean '" + best + "'?"));
    if (decl)
      d.note(decl->nameLoc, "'" + name + "' is a " + ast::declKindName(decl->kind) + ", not a model");
    return std::nullopt;
  }
  if (!decl->alias && !decl->params.empty()) {
    diags
        .error(use, "model '" + name + "' is a family with parameters; name a concrete model, as in 'model my_" + name +
                        " = " + name + "(…)'")
        .note(decl->nameLoc, "declared here");
    failedModels.insert(name);
    return std::nullopt;
  }
  if (modelsInProgress.count(name)) {
    diags.error(decl->nameLoc, "model '" + name + "' is defined in terms of itself");
    failedModels.insert(name);
    return std::nullopt;
  }
  modelsInProgress.insert(name);
  unsigned errorsBefore = diags.errorCount();

  sema::Model model;
  model.name = name;
  model.loc = decl->nameLoc;
  const ast::Decl *body = decl;
  Value call;
  call.kind = Value::Kind::Call;
  call.s = name;
  call.loc = decl->nameLoc;
  if (decl->alias) {
    const Expr &a = *decl->alias;
    if (a.kind == Expr::Kind::Name) {
      // `model m = other`: the same model under another name.
      auto idx = modelIndex(a.text, a.loc);
      modelsInProgress.erase(name);
      if (!idx) {
        failedModels.insert(name);
        return std::nullopt;
      }
      sema::Model copy = program.models[*idx];
      copy.name = name;
      copy.loc = decl->nameLoc;
      program.models.push_back(std::move(copy));
      return modelIndices[name] = int(program.models.size() - 1);
    }
    if (a.kind != Expr::Kind::Call || a.lhs->kind != Expr::Kind::Name) {
      diags.error(a.loc, "a model alias is 'model m = family(args)' or 'model m = other'");
      modelsInProgress.erase(name);
      failedModels.insert(name);
      return std::nullopt;
    }
    body = decls.lookup(a.lhs->text);
    if (!body || body->kind != ast::Decl::Kind::Model || body->alias) {
      std::vector<std::string> names =
          decls.names([](const ast::Decl &d) { return d.kind == ast::Decl::Kind::Model && !d.alias; });
      std::string best = closestMatch(a.lhs->text, names);
      diags.error(a.lhs->loc, "unknown model family '" + a.lhs->text + "'" +
                                  (best.empty() ? "" : "; did you mean '" + best + "'?"));
      modelsInProgress.erase(name);
      failedModels.insert(name);
      return std::nullopt;
    }
    call = eval(a, nullptr);
    if (call.isError()) {
      modelsInProgress.erase(name);
      failedModels.insert(name);
      return std::nullopt;
    }
  }

  // A model whose first input is named `images` classifies images (EXTENSIONS.md §4).
  model.images = !body->inputs.empty() && body->inputs[0].first == "images";
  Instantiator inst(*this, model);
  std::shared_ptr<BlockInst> top;
  if (decl->alias)
    diags.pushContext(decl->nameLoc, "in model '" + name + "', an instance of '" + body->name + "'");
  if (diags.errorCount() == errorsBefore)
    top = inst.bind(*body, call, "");
  int result = -1;
  if (top && !inst.failed)
    result = inst.apply(*top, {sema::kTokensValue, sema::kTargetsValue}, decl->nameLoc);
  if (result >= 0) {
    ValueType t = result < sema::kFirstOpValue ? ValueType{ValueType::Kind::Tokens, 0}
                                               : model.ops[result - sema::kFirstOpValue].result;
    if (t.kind != ValueType::Kind::Scalar) {
      ast::Loc at = body->bodyEnd;
      for (const ast::Stmt &st : body->body)
        if (st.kind == ast::Stmt::Kind::Return)
          at = st.value->loc;
      diags.error(at, "model '" + name + "' must return the loss (a scalar, from cross_entropy), not " + t.str());
      result = -1;
    }
  }
  if (decl->alias)
    diags.popContext();
  modelsInProgress.erase(name);
  if (result < 0 || diags.errorCount() != errorsBefore) {
    failedModels.insert(name);
    return std::nullopt;
  }
  model.result = result;
  model.layers = inst.repeatCount;
  // Residual projections (outputs added into a residual stream) get GPT-2's
  // scaled init, 0.02 / sqrt(2 · layers).
  for (const GraphOp &op : model.ops) {
    if (op.kind != OpKind::Add)
      continue;
    for (int v : op.operands) {
      if (v < sema::kFirstOpValue)
        continue;
      // Residual dropout (x + drop(proj(h))) does not hide the projection.
      if (model.ops[v - sema::kFirstOpValue].kind == OpKind::Dropout)
        v = model.ops[v - sema::kFirstOpValue].operands[0];
      if (v < sema::kFirstOpValue)
        continue;
      const GraphOp &src = model.ops[v - sema::kFirstOpValue];
      if (src.kind == OpKind::Linear && !src.params.empty())
        model.params[src.params[0]].residualProjection = true;
      if (src.kind == OpKind::Attention)
        for (int p : src.params)
          if (llvm::StringRef(model.params[p].path).ends_with(".c_proj.weight"))
            model.params[p].residualProjection = true;
    }
  }
  for (sema::Parameter &p : model.params)
    if (p.residualProjection && model.layers > 0)
      p.initStd = 0.02 / std::sqrt(2.0 * double(model.layers));
  program.models.push_back(std::move(model));
  return modelIndices[name] = int(program.models.size() - 1);
}
