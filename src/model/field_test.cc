#include "model/field.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpudoctor {
namespace {

TEST(Field, HoldsExactlyOneOfValueNotSupportedOrError) {
  Field<uint64_t> field;
  EXPECT_TRUE(field.not_supported());
  EXPECT_EQ(field.error(), "");

  field.SetFailed("GPU is lost");
  EXPECT_TRUE(field.failed());
  EXPECT_EQ(field.error(), "GPU is lost");

  field.SetValue(42);
  EXPECT_TRUE(field.has_value());
  EXPECT_EQ(field.value(), 42u);
  EXPECT_EQ(field.error(), "") << "a value carries no error text";

  field.SetNotSupported();
  EXPECT_TRUE(field.not_supported());
  EXPECT_EQ(field.optional(), std::nullopt);
  EXPECT_EQ(field.value_or(7), 7u) << "no stale value shows through";
}

TEST(Field, CopiesOwnTheirErrorText) {
  auto original = Field<std::string>::Failed("Unknown Error");
  Field<std::string> copy = original;
  original.SetFailed("changed");
  EXPECT_EQ(copy.error(), "Unknown Error");
  copy = original;
  EXPECT_EQ(copy.error(), "changed");
  copy = copy;  // NOLINT: self-assignment is safe
  EXPECT_EQ(copy.error(), "changed");
}

TEST(Field, MovesCarryValueAndError) {
  auto failed = Field<std::vector<uint32_t>>::Failed("timeout");
  Field<std::vector<uint32_t>> moved = std::move(failed);
  EXPECT_TRUE(moved.failed());
  EXPECT_EQ(moved.error(), "timeout");

  auto value = Field<std::vector<uint32_t>>::Value({30, 40});
  moved = std::move(value);
  EXPECT_TRUE(moved.has_value());
  EXPECT_EQ(moved.value(), (std::vector<uint32_t>{30, 40}));
  EXPECT_EQ(moved.error(), "");
}

TEST(Field, EqualityComparesWhatTheStateMeans) {
  EXPECT_EQ(Field<uint32_t>::Value(5), Field<uint32_t>::Value(5));
  EXPECT_NE(Field<uint32_t>::Value(5), Field<uint32_t>::Value(6));
  EXPECT_NE(Field<uint32_t>::Value(0), Field<uint32_t>::NotSupported()) << "0 is never the same as missing";
  EXPECT_EQ(Field<uint32_t>::Failed("a"), Field<uint32_t>::Failed("a"));
  EXPECT_NE(Field<uint32_t>::Failed("a"), Field<uint32_t>::Failed("b"));
  EXPECT_NE(Field<uint32_t>::Failed(""), Field<uint32_t>::NotSupported());

  Field<uint32_t> was_value = Field<uint32_t>::Value(9);
  was_value.SetNotSupported();
  EXPECT_EQ(was_value, Field<uint32_t>::NotSupported());
}

TEST(Field, RefillingKeepsTheMemoryOfAStringOrList) {
  Field<std::string> text = Field<std::string>::Value(std::string(100, 'x'));
  const char* memory = text.value().data();
  text.SetNotSupported();
  EXPECT_EQ(text, Field<std::string>::NotSupported());
  text.MutableValue().assign("a new value, longer than a string holds in place");
  EXPECT_EQ(text, Field<std::string>::Value("a new value, longer than a string holds in place"));
  EXPECT_EQ(text.value().data(), memory);

  Field<std::vector<uint32_t>> list = Field<std::vector<uint32_t>>::Failed("Unknown Error");
  list.MutableValue() = {1, 2, 3};
  EXPECT_EQ(list, Field<std::vector<uint32_t>>::Value({1, 2, 3}));
  EXPECT_EQ(list.error(), "");
}

TEST(Field, StaysSmall) {
  // A snapshot of 8 GPUs holds over a thousand fields; the error text lives behind a pointer.
  EXPECT_LE(sizeof(Field<uint64_t>), 24u);
  EXPECT_LE(sizeof(Field<bool>), 16u);
}

}  // namespace
}  // namespace gpudoctor
