#include "logs/catalog_codec.h"

#include <cstring>
#include <type_traits>

namespace gpudoctor {

namespace {

// Bump when a catalog struct gains, loses or reorders a field.
constexpr std::string_view kCatalogMagic = "gpudoctor-catalog-3\n";

// Each catalog struct lists its fields once; writing and reading both walk them.
template <class V, class T> void Fields(V& v, T& x) requires std::is_same_v<std::remove_const_t<T>, XidInfo> {
  v(x.code, x.name, x.mnemonic, x.severity, x.causes, x.also_kinds, x.steps, x.action);
}
template <class V, class T> void Fields(V& v, T& x) requires std::is_same_v<std::remove_const_t<T>, SxidInfo> {
  v(x.code, x.name, x.severity, x.action);
}
template <class V, class T> void Fields(V& v, T& x) requires std::is_same_v<std::remove_const_t<T>, NvLink5Row> {
  v(x.xid, x.units, x.error_status, x.subcode, x.fatal, x.immediate, x.investigatory);
}
template <class V, class T> void Fields(V& v, T& x) requires std::is_same_v<std::remove_const_t<T>, RecoveryAction> {
  v(x.action, x.names, x.severity, x.step);
}
template <class V, class T> void Fields(V& v, T& x) requires std::is_same_v<std::remove_const_t<T>, Xid74Bits> {
  v(x.register_index, x.bits, x.severity, x.meaning, x.step);
}
template <class V, class T> void Fields(V& v, T& x) requires std::is_same_v<std::remove_const_t<T>, XidDecodeTables> {
  v(x.nvlink5, x.nvlink5_actions, x.recovery_actions, x.xid74_bits);
}
template <class V, class T> void Fields(V& v, T& x) requires std::is_same_v<std::remove_const_t<T>, KindInfo> {
  v(x.name, x.title, x.severity, x.scope, x.causes, x.cause, x.action, x.window_lines);
}
template <class V, class T> void Fields(V& v, T& x) requires std::is_same_v<std::remove_const_t<T>, PatternSpec> {
  v(x.id, x.kind, x.role, x.literals, x.caseless, x.regex, x.severity, x.severity_from, x.severity_map, x.append,
    x.window_lines, x.reach_lines, x.fallback);
}
template <class V, class T> void Fields(V& v, T& x) requires std::is_same_v<std::remove_const_t<T>, DriverSubsystem> {
  v(x.name, x.kind, x.severity, x.functions, x.modules, x.folders);
}
template <class V, class T> void Fields(V& v, T& x) requires std::is_same_v<std::remove_const_t<T>, DriverBenign> {
  v(x.function, x.text, x.starts, x.reason);
}
template <class V, class T> void Fields(V& v, T& x) requires std::is_same_v<std::remove_const_t<T>, DriverTables> {
  v(x.generic_kind, x.error_words, x.subsystems, x.benign);
}


// Enums and their largest value, so a reader refuses what no enumerator means.
template <class E> constexpr uint32_t kLargest = 0;
template <> constexpr uint32_t kLargest<EventSeverity> = static_cast<uint32_t>(EventSeverity::kCritical);
template <> constexpr uint32_t kLargest<EventScope> = static_cast<uint32_t>(EventScope::kHost);
template <> constexpr uint32_t kLargest<PatternRole> = static_cast<uint32_t>(PatternRole::kContinue);

class Writer {
 public:
  template <class... T> void operator()(const T&... values) { (Put(values), ...); }
  std::string& out() { return out_; }

 private:
  void Put(uint32_t value) { out_.append(reinterpret_cast<const char*>(&value), sizeof value); }
  void Put(bool value) { out_.push_back(value ? 1 : 0); }
  template <class E> requires std::is_enum_v<E> void Put(E value) { Put(static_cast<uint32_t>(value)); }
  void Put(const std::string& text) {
    Put(static_cast<uint32_t>(text.size()));
    out_.append(text);
  }
  template <class T> void Put(const std::optional<T>& value) {
    Put(value.has_value());
    if (value) Put(*value);
  }
  template <class T> void Put(const std::vector<T>& values) {
    Put(static_cast<uint32_t>(values.size()));
    for (const T& value : values) Put(value);
  }
  template <class K, class V, class C> void Put(const std::map<K, V, C>& values) {
    Put(static_cast<uint32_t>(values.size()));
    for (const auto& [key, value] : values) (*this)(key, value);
  }
  template <class T> requires(!std::is_enum_v<T> && std::is_class_v<T>) void Put(const T& value) { Fields(*this, value); }

  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view bytes) : in_(bytes) {}
  template <class... T> void operator()(T&... values) { (Get(values), ...); }
  bool ok() const { return ok_; }
  bool done() const { return in_.empty(); }

 private:
  bool Take(void* to, size_t size) {
    if (!ok_ || in_.size() < size) return ok_ = false;
    std::memcpy(to, in_.data(), size);
    in_.remove_prefix(size);
    return true;
  }
  // A count can be no larger than the bytes left: damaged bytes never make a huge allocation.
  bool Count(uint32_t& count) {
    Get(count);
    if (count > in_.size()) ok_ = false;
    return ok_;
  }
  void Get(uint32_t& value) { Take(&value, sizeof value); }
  void Get(bool& value) {
    char byte = 0;
    if (Take(&byte, 1) && byte != 0 && byte != 1) ok_ = false;
    value = byte == 1;
  }
  template <class E> requires std::is_enum_v<E> void Get(E& value) {
    uint32_t raw = 0;
    Get(raw);
    if (raw > kLargest<E>) ok_ = false;
    value = ok_ ? static_cast<E>(raw) : E{};
  }
  void Get(std::string& text) {
    uint32_t size = 0;
    if (!Count(size)) return;
    text.assign(in_.data(), size);
    in_.remove_prefix(size);
  }
  template <class T> void Get(std::optional<T>& value) {
    bool present = false;
    Get(present);
    if (!ok_ || !present) return value.reset();
    Get(value.emplace());
  }
  template <class T> void Get(std::vector<T>& values) {
    uint32_t count = 0;
    if (!Count(count)) return;
    values.resize(count);
    for (T& value : values) Get(value);
  }
  template <class K, class V, class C> void Get(std::map<K, V, C>& values) {
    uint32_t count = 0;
    if (!Count(count)) return;
    for (uint32_t i = 0; i < count && ok_; ++i) {
      K key{};
      V value{};
      (*this)(key, value);
      values.insert_or_assign(std::move(key), std::move(value));
    }
  }
  template <class T> requires(!std::is_enum_v<T> && std::is_class_v<T>) void Get(T& value) { Fields(*this, value); }

  std::string_view in_;
  bool ok_ = true;
};

}  // namespace

std::string CatalogCodec::Encode(const LogCatalog& catalog) {
  Writer writer;
  writer.out().append(kCatalogMagic);
  writer(catalog.xids_, catalog.sxids_, catalog.decode_, catalog.kinds_, catalog.patterns_, catalog.driver_);
  return std::move(writer.out());
}

Result<LogCatalog> CatalogCodec::Decode(std::string_view bytes) {
  if (bytes.substr(0, kCatalogMagic.size()) != kCatalogMagic) {
    return Error{"not an encoded event catalog of this gpudoctor"};
  }
  Reader reader(bytes.substr(kCatalogMagic.size()));
  LogCatalog catalog;
  reader(catalog.xids_, catalog.sxids_, catalog.decode_, catalog.kinds_, catalog.patterns_, catalog.driver_);
  if (!reader.ok() || !reader.done()) return Error{"encoded event catalog is truncated or damaged"};
  return catalog;
}

}  // namespace gpudoctor
