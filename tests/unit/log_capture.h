// A logger for tests: captures what the SDK logs while it is alive (info and above), for
// assertions on warnings and info messages.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "edgeinfer/logger.h"

namespace edgeinfer::test {

/// Captures everything logged while alive (info and above).
class LogCapture : public ILogger {
 public:
  LogCapture() : oldLevel_(getLogLevel()) {
    setLogLevel(Severity::kInfo);
    setLogger(this);
  }
  ~LogCapture() override {
    setLogger(nullptr);
    setLogLevel(oldLevel_);
  }
  void log(Severity s, const char* m) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.push_back(std::string(severityName(s)) + ":" + m);
  }
  /// Lines of severity `sev` that contain `text`.
  int count(Severity sev, const std::string& text) const {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    const std::string prefix = std::string(severityName(sev)) + ":";
    for (const auto& l : lines_)
      if (l.rfind(prefix, 0) == 0 && l.find(text) != std::string::npos) ++n;
    return n;
  }
  std::string all() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string s;
    for (const auto& l : lines_) s += l + "\n";
    return s;
  }

 private:
  Severity oldLevel_;
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

}  // namespace edgeinfer::test
