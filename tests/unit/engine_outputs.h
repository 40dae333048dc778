// Helpers for tests that compare whole engines: every output of one run (host copies), and
// bit-for-bit equality of two tensors. Used where an engine must reproduce another exactly
// (GPU against the CPU reference, a split engine against the whole model, saved and loaded).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "edgeinfer/engine.h"

namespace edgeinfer::test {

/// Every output of one run of `e` on `in` (host copies); a run in `ctx` when given (a context
/// that replays its CUDA graph), else in a new context. Empty, with a test failure, on error.
inline std::map<std::string, Tensor> allOutputs(const Engine& e,
                                                const std::map<std::string, Tensor>& in,
                                                ExecutionContext* ctx = nullptr) {
  std::unique_ptr<ExecutionContext> own;
  if (!ctx) {
    auto c = e.createExecutionContext();
    EXPECT_TRUE(c.ok()) << c.status().toString();
    if (!c.ok()) return {};
    own = std::move(c).value();
    ctx = own.get();
  }
  auto out = ctx->run(in);
  EXPECT_TRUE(out.ok()) << out.status().toString();
  std::map<std::string, Tensor> copies;
  if (out.ok())
    for (const auto& [name, t] : *out) copies[name] = t.clone();
  return copies;
}

/// `a` equals `b` bit for bit: type, shape and bytes.
inline void expectSameTensor(const Tensor& a, const Tensor& b, const std::string& what = "") {
  ASSERT_FALSE(a.empty()) << what;
  ASSERT_FALSE(b.empty()) << what;
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  ASSERT_EQ(a.shape(), b.shape()) << what;
  EXPECT_EQ(0, std::memcmp(a.raw(), b.raw(), a.bytes())) << what;
}

}  // namespace edgeinfer::test
