#include "edgeinfer/logger.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace edgeinfer {
namespace {

class StderrLogger final : public ILogger {
 public:
  void log(Severity severity, const char* message) noexcept override {
    static std::mutex mu;
    std::lock_guard<std::mutex> lock(mu);
    std::fprintf(stderr, "[edgeinfer] %s: %s\n", severityName(severity), message);
  }
};

StderrLogger g_default;
std::atomic<ILogger*> g_logger{&g_default};

Severity initialLevel() {
  const char* env = std::getenv("EDGEINFER_LOG_LEVEL");
  if (!env) return Severity::kWarning;
  if (!std::strcmp(env, "error")) return Severity::kError;
  if (!std::strcmp(env, "info")) return Severity::kInfo;
  if (!std::strcmp(env, "verbose")) return Severity::kVerbose;
  return Severity::kWarning;
}

std::atomic<int> g_level{static_cast<int>(initialLevel())};

}  // namespace

const char* severityName(Severity s) {
  switch (s) {
    case Severity::kError:
      return "error";
    case Severity::kWarning:
      return "warning";
    case Severity::kInfo:
      return "info";
    case Severity::kVerbose:
      return "verbose";
  }
  return "?";
}

void setLogger(ILogger* logger) {
  g_logger.store(logger ? logger : &g_default);
}
ILogger& getLogger() {
  return *g_logger.load();
}
void setLogLevel(Severity maxSeverity) {
  g_level.store(static_cast<int>(maxSeverity));
}
Severity getLogLevel() {
  return static_cast<Severity>(g_level.load());
}

void log(Severity severity, const std::string& message) {
  if (static_cast<int>(severity) > g_level.load()) return;
  getLogger().log(severity, message.c_str());
}

}  // namespace edgeinfer
