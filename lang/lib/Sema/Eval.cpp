// Compile-time evaluation: integer folding (exact division, overflow checked),
// quantities with units, and the typed conversions every declaration uses.
#include "SemaInternal.h"

#include "llvm/Support/MathExtras.h"

#include <cmath>

using namespace plan;
using namespace plan::lang;
using ast::Expr;

std::string Value::describe() const {
  switch (kind) {
  case Kind::Error:
    return "an invalid value";
  case Kind::None:
    return "'none'";
  case Kind::Int:
    return "an integer";
  case Kind::Float:
    return "a number with a fraction";
  case Kind::Bool:
    return "a boolean";
  case Kind::String:
    return "a string";
  case Kind::Quantity:
    return std::string(units::describe(dim)) + " ('" + s + "')";
  case Kind::Name:
    return "the name '" + s + "'";
  case Kind::Word:
    return "the word '" + s + "'";
  case Kind::List:
    if (items.empty())
      return "an empty list";
    return items.front().key.empty() ? "a list without 'key: value' items" : "a list of 'key: value' items";
  case Kind::Call:
    return "a call of '" + s + "'";
  }
  return "a value";
}

static Value makeInt(int64_t v, ast::Loc loc) {
  Value r;
  r.kind = Value::Kind::Int;
  r.i = v;
  r.f = double(v);
  r.loc = loc;
  return r;
}

/// `lhs op rhs`: integers exactly (overflow and inexact division are errors), floats,
/// and quantities scaled by numbers or added to quantities of the same dimension.
Value Sema::evalBinary(const Expr &e, const Env *env) {
  Value a = eval(*e.lhs, env);
  Value b = eval(*e.rhs, env);
  if (a.isError() || b.isError())
    return Value::error();
  char op = e.text[0];
  if (a.kind == Value::Kind::Int && b.kind == Value::Kind::Int) {
    int64_t out = 0;
    bool overflow = false;
    switch (op) {
    case '+':
      overflow = __builtin_add_overflow(a.i, b.i, &out);
      break;
    case '-':
      overflow = __builtin_sub_overflow(a.i, b.i, &out);
      break;
    case '*':
      overflow = __builtin_mul_overflow(a.i, b.i, &out);
      break;
    case '/':
    case '%':
      if (b.i == 0) {
        diags.error(e.loc, "division by zero").note(b.loc, "the divisor is 0");
        return Value::error();
      }
      if (a.i == INT64_MIN && b.i == -1) {
        overflow = true;
        break;
      }
      if (op == '%') {
        out = a.i % b.i;
      } else {
        if (a.i % b.i != 0) {
          diags
              .error(e.loc, "inexact integer division: " + std::to_string(a.i) + " / " + std::to_string(b.i) +
                                " leaves a remainder of " + std::to_string(a.i % b.i))
              .note("integer expressions must divide exactly; change an operand");
          return Value::error();
        }
        out = a.i / b.i;
      }
      break;
    }
    if (overflow) {
      diags.error(e.loc, "integer overflow in '" + e.text + "'");
      return Value::error();
    }
    return makeInt(out, e.loc);
  }
  bool aNum = a.kind == Value::Kind::Int || a.kind == Value::Kind::Float;
  bool bNum = b.kind == Value::Kind::Int || b.kind == Value::Kind::Float;
  double x = aNum || a.kind == Value::Kind::Quantity ? a.f : 0;
  double y = bNum || b.kind == Value::Kind::Quantity ? b.f : 0;
  // Floats, and quantities scaled by numbers or added to the same dimension.
  if ((aNum && bNum) || (a.kind == Value::Kind::Quantity && bNum && (op == '*' || op == '/')) ||
      (aNum && b.kind == Value::Kind::Quantity && op == '*') ||
      (a.kind == Value::Kind::Quantity && b.kind == Value::Kind::Quantity && a.dim == b.dim &&
       (op == '+' || op == '-'))) {
    if (op == '%') {
      diags.error(e.loc, "'%' needs two integers");
      return Value::error();
    }
    if (op == '/' && y == 0) {
      diags.error(e.loc, "division by zero");
      return Value::error();
    }
    Value r2 = a.kind == Value::Kind::Quantity ? a : b.kind == Value::Kind::Quantity ? b : a;
    r2.kind = (a.kind == Value::Kind::Quantity || b.kind == Value::Kind::Quantity) ? Value::Kind::Quantity
                                                                                   : Value::Kind::Float;
    r2.f = op == '+' ? x + y : op == '-' ? x - y : op == '*' ? x * y : x / y;
    r2.loc = e.loc;
    if (!std::isfinite(r2.f)) {
      diags.error(e.loc, "arithmetic overflow");
      return Value::error();
    }
    return r2;
  }
  auto d = diags.error(e.loc, "cannot apply '" + e.text + "' to " + a.describe() + " and " + b.describe());
  if (a.kind == Value::Kind::Quantity && b.kind == Value::Kind::Name && b.s == "s" && op == '/')
    d.note("a rate is written without spaces, as in '450 GB/s'");
  return Value::error();
}

Value Sema::eval(const Expr &e, const Env *env) {
  Value r;
  r.loc = e.loc;
  switch (e.kind) {
  case Expr::Kind::Number: {
    if (!e.unit.empty()) {
      auto unit = units::lookup(e.unit);
      if (!unit) {
        std::string best = closestMatch(e.unit, units::allNames());
        auto d = diags.error(e.unitLoc,
                             "unknown unit '" + e.unit + "'" + (best.empty() ? "" : "; did you mean '" + best + "'?"));
        d.note("units are B KB MB GB TB PB KiB MiB GiB TiB PiB, the same with /s, "
               "FLOP/s KFLOP/s MFLOP/s GFLOP/s TFLOP/s PFLOP/s, and s ms us ns min h");
        return Value::error();
      }
      r.kind = Value::Kind::Quantity;
      r.dim = unit->dim;
      r.f = e.number * unit->factor;
      r.s = e.unit;
      if (!std::isfinite(r.f)) {
        diags.error(e.loc, "quantity '" + e.text + " " + e.unit + "' is out of range");
        return Value::error();
      }
      return r;
    }
    if (e.isInteger)
      return makeInt(e.integer, e.loc);
    r.kind = Value::Kind::Float;
    r.f = e.number;
    return r;
  }
  case Expr::Kind::Word:
    r.kind = Value::Kind::Word;
    r.s = e.text;
    return r;
  case Expr::Kind::String:
    r.kind = Value::Kind::String;
    r.s = e.text;
    return r;
  case Expr::Kind::Name: {
    if (env) {
      auto it = env->find(e.text);
      if (it != env->end()) {
        Value v = it->second;
        v.loc = e.loc;
        return v;
      }
    }
    if (e.text == "true" || e.text == "false") {
      r.kind = Value::Kind::Bool;
      r.b = e.text == "true";
      return r;
    }
    if (e.text == "none") {
      r.kind = Value::Kind::None;
      return r;
    }
    r.kind = Value::Kind::Name;
    r.s = e.text;
    return r;
  }
  case Expr::Kind::List:
  case Expr::Kind::Call: {
    r.kind = e.kind == Expr::Kind::List ? Value::Kind::List : Value::Kind::Call;
    if (e.kind == Expr::Kind::Call) {
      if (e.lhs->kind != Expr::Kind::Name) {
        diags.error(e.loc, "only a named function can be called here");
        return Value::error();
      }
      r.s = e.lhs->text;
    }
    bool keyed = !e.args.empty() && !e.args.front().key.empty();
    std::map<std::string, ast::Loc> keys;
    for (const ast::Arg &a : e.args) {
      if (e.kind == Expr::Kind::List && a.key.empty() == keyed) {
        diags.error(a.value->loc, "a list is either all 'key: value' items or none");
        return Value::error();
      }
      if (!a.key.empty() && !keys.insert({a.key, a.keyLoc}).second) {
        diags.error(a.keyLoc, "duplicate key '" + a.key + "'").note(keys[a.key], "first set here");
        return Value::error();
      }
      Value::Item item;
      item.key = a.key;
      item.keyLoc = a.keyLoc;
      item.value = std::make_shared<Value>(eval(*a.value, env));
      if (item.value->isError())
        return Value::error();
      r.items.push_back(std::move(item));
    }
    return r;
  }
  case Expr::Kind::Unary: {
    Value v = eval(*e.lhs, env);
    if (v.isError())
      return v;
    if (e.text == "+")
      return v;
    if (v.kind == Value::Kind::Int) {
      if (v.i == INT64_MIN) {
        diags.error(e.loc, "integer overflow");
        return Value::error();
      }
      return makeInt(-v.i, e.loc);
    }
    if (v.kind == Value::Kind::Float || v.kind == Value::Kind::Quantity) {
      v.f = -v.f;
      v.loc = e.loc;
      return v;
    }
    diags.error(e.loc, "cannot negate " + v.describe());
    return Value::error();
  }
  case Expr::Kind::Binary:
    return evalBinary(e, env);
  case Expr::Kind::Member:
    diags.error(e.loc, "'." + e.text + "' is not a constant expression");
    return Value::error();
  case Expr::Kind::Repeat:
    diags.error(e.loc, "'repeat' makes layers; it can only be bound in a block or model body");
    return Value::error();
  }
  return Value::error();
}

void Sema::typeError(const Value &v, llvm::StringRef what, llvm::StringRef expected) {
  if (v.isError())
    return;
  auto d = diags.error(v.loc, what.str() + " must be " + expected.str() + ", not " + v.describe());
  if (v.kind == Value::Kind::Word) {
    size_t digits = v.s.find_first_not_of("0123456789");
    std::string unit = v.s.substr(digits);
    if (units::lookup(unit))
      d.note("put a space between a number and its unit: '" + v.s.substr(0, digits) + " " + unit + "'");
    else
      d.note("'" + v.s + "' is not a valid number");
  }
}

std::optional<int64_t> Sema::toInt(const Value &v, llvm::StringRef what) {
  if (v.kind == Value::Kind::Int)
    return v.i;
  if (v.kind == Value::Kind::Quantity) {
    if (!v.isError())
      diags.error(v.loc, what.str() + " must be a plain integer, not " + v.describe())
          .note("remove the unit '" + v.s + "'");
    return std::nullopt;
  }
  typeError(v, what, "an integer");
  return std::nullopt;
}

std::optional<int64_t> Sema::toPositiveInt(const Value &v, llvm::StringRef what) {
  auto i = toInt(v, what);
  if (i && *i < 1) {
    diags.error(v.loc, what.str() + " must be at least 1, not " + std::to_string(*i));
    return std::nullopt;
  }
  return i;
}

std::optional<double> Sema::toFloat(const Value &v, llvm::StringRef what) {
  if (v.kind == Value::Kind::Int || v.kind == Value::Kind::Float)
    return v.f;
  if (v.kind == Value::Kind::Quantity) {
    diags.error(v.loc, what.str() + " must be a plain number, not " + v.describe())
        .note("remove the unit '" + v.s + "'");
    return std::nullopt;
  }
  typeError(v, what, "a number");
  return std::nullopt;
}

std::optional<bool> Sema::toBool(const Value &v, llvm::StringRef what) {
  if (v.kind == Value::Kind::Bool)
    return v.b;
  typeError(v, what, "true or false");
  return std::nullopt;
}

std::optional<std::string> Sema::toString(const Value &v, llvm::StringRef what) {
  if (v.kind == Value::Kind::String)
    return v.s;
  typeError(v, what, "a string");
  return std::nullopt;
}

std::optional<double> Sema::toQuantity(const Value &v, units::Dim dim, llvm::StringRef what) {
  if (v.kind == Value::Kind::Quantity && v.dim == dim)
    return v.f;
  if (v.isError())
    return std::nullopt;
  std::string expected = std::string(units::describe(dim)) + " with a unit, as in '" + units::example(dim) + "'";
  if (v.kind == Value::Kind::Int || v.kind == Value::Kind::Float) {
    diags.error(v.loc, what.str() + " must be " + expected + "; a plain number has no unit");
    return std::nullopt;
  }
  typeError(v, what, expected);
  return std::nullopt;
}

std::optional<std::string> Sema::toWord(const Value &v, llvm::StringRef what) {
  if (v.kind == Value::Kind::Name || v.kind == Value::Kind::Word)
    return v.s;
  if (v.kind == Value::Kind::Bool)
    return std::string(v.b ? "true" : "false");
  if (v.kind == Value::Kind::None)
    return std::string("none");
  typeError(v, what, "a name");
  return std::nullopt;
}

std::optional<std::string> Sema::toChoice(const Value &v, llvm::StringRef what,
                                          const std::vector<std::string> &choices) {
  auto w = toWord(v, what);
  if (!w)
    return std::nullopt;
  for (const std::string &c : choices)
    if (c == *w)
      return w;
  std::string list;
  for (size_t i = 0; i < choices.size(); ++i)
    list += (i ? (i + 1 == choices.size() ? " or " : ", ") : "") + choices[i];
  std::string best = closestMatch(*w, choices, 2);
  diags.error(v.loc, "unknown " + what.str() + " '" + *w + "'" + (best.empty() ? "" : "; did you mean '" + best + "'?"))
      .note(what.str() + " is one of " + list);
  return std::nullopt;
}

std::optional<std::vector<std::pair<std::string, ast::Loc>>> Sema::toNameList(const Value &v, llvm::StringRef what) {
  std::vector<std::pair<std::string, ast::Loc>> out;
  if (v.kind == Value::Kind::Name) {
    out.push_back({v.s, v.loc});
    return out;
  }
  if (v.kind == Value::Kind::List) {
    for (const Value::Item &it : v.items) {
      if (!it.key.empty() || it.value->kind != Value::Kind::Name) {
        typeError(*it.value, what, "a name");
        return std::nullopt;
      }
      out.push_back({it.value->s, it.value->loc});
    }
    return out;
  }
  typeError(v, what, "a name or a list of names");
  return std::nullopt;
}

Section::Section(Sema &sema, const std::vector<ast::Entry> &entries, llvm::StringRef what,
                 const std::vector<std::string> &keys)
    : sema(sema), what(what.str()) {
  for (const ast::Entry &e : entries) {
    if (std::find(keys.begin(), keys.end(), e.key) == keys.end()) {
      std::string best = closestMatch(e.key, keys);
      if (!best.empty())
        suggested.insert(best);
      std::string list;
      for (size_t i = 0; i < keys.size(); ++i)
        list += (i ? ", " : "") + keys[i];
      sema.diags
          .error(e.loc, "unknown key '" + e.key + "' in " + this->what +
                            (best.empty() ? "" : "; did you mean '" + best + "'?"))
          .note("the keys of " + this->what + " are: " + list);
      continue;
    }
    auto [it, inserted] = byKey.insert({e.key, &e});
    if (!inserted)
      sema.diags.error(e.loc, "duplicate key '" + e.key + "' in " + this->what).note(it->second->loc, "first set here");
  }
}

const ast::Entry *Section::get(const std::string &key) const {
  auto it = byKey.find(key);
  return it == byKey.end() ? nullptr : it->second;
}

const ast::Expr *Section::value(const std::string &key) const {
  const ast::Entry *e = get(key);
  if (!e)
    return nullptr;
  if (e->isSection) {
    sema.diags.error(e->loc, "'" + key + "' in " + what + " takes a value, not a { … } section");
    return nullptr;
  }
  return e->value.get();
}

const ast::Entry *Section::section(const std::string &key) const {
  const ast::Entry *e = get(key);
  if (!e)
    return nullptr;
  if (!e->isSection) {
    sema.diags.error(e->loc, "'" + key + "' in " + what + " is a section: write '" + key + " { … }'");
    return nullptr;
  }
  return e;
}

std::optional<std::map<std::string, Value>> plan::lang::bindArgs(Sema &sema, const Signature &sig, const Value &call) {
  std::map<std::string, Value> out;
  std::vector<std::string> names;
  for (const auto &p : sig.params)
    names.push_back(p.name);
  size_t positional = 0;
  bool ok = true;
  for (const Value::Item &it : call.items) {
    std::string name;
    ast::Loc where = it.key.empty() ? it.value->loc : it.keyLoc;
    if (it.key.empty()) {
      if (positional >= sig.params.size()) {
        sema.diags.error(where, "too many arguments to '" + sig.name + "': it takes at most " +
                                    std::to_string(sig.params.size()));
        ok = false;
        continue;
      }
      name = sig.params[positional++].name;
    } else {
      name = it.key;
      if (std::find(names.begin(), names.end(), name) == names.end()) {
        std::string best = closestMatch(name, names);
        std::string list;
        for (size_t i = 0; i < names.size(); ++i)
          list += (i ? ", " : "") + names[i];
        sema.diags
            .error(where, "'" + sig.name + "' has no argument '" + name + "'" +
                              (best.empty() ? "" : "; did you mean '" + best + "'?"))
            .note("the arguments of '" + sig.name + "' are: " + list);
        ok = false;
        continue;
      }
    }
    if (out.count(name)) {
      sema.diags.error(where, "argument '" + name + "' of '" + sig.name + "' is given twice");
      ok = false;
      continue;
    }
    out[name] = *it.value;
  }
  for (const auto &p : sig.params)
    if (p.required && !out.count(p.name)) {
      sema.diags.error(call.loc, "'" + sig.name + "' needs the argument '" + p.name + "'");
      ok = false;
    }
  if (!ok)
    return std::nullopt;
  return out;
}
