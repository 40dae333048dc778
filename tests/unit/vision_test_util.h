// Frames for the vision tests (CPU reference, OpenCV oracle, GPU preprocessing).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "edgeinfer/vision/preprocess.h"

namespace edgeinfer::vision::test {

constexpr PixelFormat kAllFormats[] = {
    PixelFormat::kNV12, PixelFormat::kI420, PixelFormat::kRGBA,
    PixelFormat::kBGRA, PixelFormat::kRGBx, PixelFormat::kBGRx,
    PixelFormat::kRGB,  PixelFormat::kBGR,  PixelFormat::kGray8,
};

inline bool isYuv(PixelFormat f) {
  return f == PixelFormat::kNV12 || f == PixelFormat::kI420;
}

/// A host frame in a buffer this struct owns; padding bytes hold random garbage.
struct TestFrame {
  std::vector<uint8_t> data;
  FrameView view;
};

/// Random pixels; `pad` > 0 adds that many bytes to the luma stride and pad + 3 to the chroma
/// stride.
inline TestFrame randomFrame(PixelFormat f, int w, int h, int pad, std::mt19937& rng) {
  TestFrame t;
  const int luma = pad ? static_cast<int>(planeRowBytes(f, w, 0)) + pad : 0;
  const int chroma = pad && isYuv(f) ? static_cast<int>(planeRowBytes(f, w, 1)) + pad + 3 : 0;
  t.data.resize(frameBufferBytes(f, w, h, luma, chroma));
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& b : t.data) b = static_cast<uint8_t>(byte(rng));
  auto view = wrapFrame(f, w, h, t.data.data(), luma, chroma);
  EXPECT_TRUE(view.ok()) << view.status().toString();
  if (view.ok()) t.view = *view;
  return t;
}

}  // namespace edgeinfer::vision::test
