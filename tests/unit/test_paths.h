// Where the unit tests find the repository, the fetched models (models/fetch.sh) and the test
// media (scripts/fetch_media.sh); EDGEINFER_MODELS_DIR and EDGEINFER_MEDIA_DIR override them
// (the GPU machine runs the tests from a bundle, away from the checkout).
#pragma once

#include <sys/stat.h>

#include <cstdlib>
#include <string>

namespace edgeinfer::test {

inline bool exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

inline std::string repoRoot() {
  std::string root = EDGEINFER_TEST_DATA_DIR;  // <repo>/tests/data
  return root.substr(0, root.size() - std::string("/tests/data").size());
}

inline std::string mediaDir() {
  if (const char* e = std::getenv("EDGEINFER_MEDIA_DIR")) return e;
  return EDGEINFER_TEST_MEDIA_DIR;
}

inline std::string modelsDir() {
  if (const char* e = std::getenv("EDGEINFER_MODELS_DIR")) return e;
  return repoRoot() + "/models";
}

}  // namespace edgeinfer::test
