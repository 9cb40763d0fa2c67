// Internal: reading the JSON manifests that planc embeds in executables, with
// errors that name the field (its JSON path) and what is wrong with it.
#ifndef PLANRT_LIB_MANIFEST_JSON_H
#define PLANRT_LIB_MANIFEST_JSON_H

#include "status.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace planrt::manifest {

using json = nlohmann::json;

/// A malformed manifest: the JSON path of the field and what is wrong with it.
struct Malformed {
  std::string what;
};

inline const json &field(const json &object, const char *key, const std::string &where) {
  if (!object.is_object())
    throw Malformed{where + " is not an object"};
  auto it = object.find(key);
  if (it == object.end())
    throw Malformed{where + " has no '" + key + "'"};
  return *it;
}

/// The JSON path of `key` in the object at `where` ("the manifest" at the top).
inline std::string path(const std::string &where, const char *key) {
  return where == "the manifest" ? key : where + "." + key;
}

inline int64_t integer(const json &object, const char *key, const std::string &where, int64_t min, int64_t max) {
  const json &v = field(object, key, where);
  if (!v.is_number_integer())
    throw Malformed{path(where, key) + " is " + v.dump() + ", not an integer"};
  bool inRange =
      v.is_number_unsigned() ? v.get<uint64_t>() <= uint64_t(max) : v.get<int64_t>() >= min && v.get<int64_t>() <= max;
  if (!inRange)
    throw Malformed{path(where, key) + " is " + v.dump() + ", outside [" + std::to_string(min) + ", " +
                    std::to_string(max) + "]"};
  return v.is_number_unsigned() ? int64_t(v.get<uint64_t>()) : v.get<int64_t>();
}

inline std::string text(const json &object, const char *key, const std::string &where) {
  const json &v = field(object, key, where);
  if (!v.is_string())
    throw Malformed{path(where, key) + " is " + v.dump() + ", not a string"};
  return v.get<std::string>();
}

inline std::vector<std::string> texts(const json &object, const char *key, const std::string &where) {
  const json &v = field(object, key, where);
  if (!v.is_array())
    throw Malformed{path(where, key) + " is not an array"};
  std::vector<std::string> out;
  for (const json &e : v) {
    if (!e.is_string() || e.get<std::string>().empty())
      throw Malformed{path(where, key) + " holds " + e.dump() + ", not a file name"};
    out.push_back(e.get<std::string>());
  }
  return out;
}

/// A number (integer or not) in [min, max].
inline double real(const json &object, const char *key, const std::string &where, double min, double max) {
  const json &v = field(object, key, where);
  if (!v.is_number() || !(v.get<double>() >= min && v.get<double>() <= max))
    throw Malformed{path(where, key) + " is " + v.dump() + ", not a number in [" + std::to_string(min) + ", " +
                    std::to_string(max) + "]"};
  return v.get<double>();
}

/// An array of finite numbers.
inline std::vector<double> numbers(const json &object, const char *key, const std::string &where) {
  const json &v = field(object, key, where);
  if (!v.is_array())
    throw Malformed{path(where, key) + " is not an array"};
  std::vector<double> out;
  for (const json &e : v) {
    if (!e.is_number() || !std::isfinite(e.get<double>()))
      throw Malformed{path(where, key) + " holds " + e.dump() + ", not a number"};
    out.push_back(e.get<double>());
  }
  return out;
}

/// Runs `body`, which reads a manifest and throws Malformed (or a JSON error) when
/// it is malformed, as a status: PLANRT_ERR_FORMAT with "the manifest is malformed: …".
template <typename Body> planrt_status parse(Body body) {
  try {
    body();
  } catch (const Malformed &e) {
    return planrt::fail(PLANRT_ERR_FORMAT, "the manifest is malformed: %s", e.what.c_str());
  } catch (const std::exception &e) {
    return planrt::fail(PLANRT_ERR_FORMAT, "the manifest is malformed: %s", e.what());
  }
  return PLANRT_OK;
}

} // namespace planrt::manifest

#endif // PLANRT_LIB_MANIFEST_JSON_H
